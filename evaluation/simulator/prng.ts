/**
 * The simulator's only source of chance: xoshiro128** seeded through splitmix32. Small,
 * fast and the same on every machine, so a seed is a reproduction. Nothing in the
 * simulator calls Math.random.
 */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next() | 1;
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0;
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return result;
  }

  /** A uniform integer in [0, n). */
  below(n: number): number {
    return n <= 1 ? 0 : Math.floor((this.next() / 0x1_0000_0000) * n);
  }
}

const rotl = (x: number, k: number): number => (x << k) | (x >>> (32 - k));
