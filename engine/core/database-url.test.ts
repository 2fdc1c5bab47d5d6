/** A URL written down keeps none of its secrets, however its password is spelled. */
import { describe, expect, it } from 'vitest';
import { redactUrlSecrets } from './database-url.ts';

describe('redactUrlSecrets', () => {
  it.each([
    ['postgres://tron:s3cret@db.example:5432/tron', 'postgres://tron:***@db.example:5432/tron'],
    ['postgres://tron:p@ss/w@rd@db.example/tron', 'postgres://tron:***@db.example/tron'],
    ['postgresql://tron@db.example/tron?sslmode=require&password=s3cret', 'postgresql://tron@db.example/tron?sslmode=require&password=***'],
    ['postgres://db.example/tron?sslpassword=s3cret&application_name=x', 'postgres://db.example/tron?sslpassword=***&application_name=x'],
    ['https://user:tok3n@hooks.example/x', 'https://user:***@hooks.example/x'],
  ])('hides the password of %s', (url, shown) => {
    expect(redactUrlSecrets(url)).toBe(shown);
    expect(redactUrlSecrets(url)).not.toMatch(/s3cret|p@ss|tok3n/);
  });

  it('leaves a URL without secrets as it is', () => {
    for (const url of ['postgres://tron@db.example:5432/tron', 'postgres://db.example/tron', 'http://127.0.0.1:9/x'])
      expect(redactUrlSecrets(url)).toBe(url);
  });
});
