/**
 * Whom tron trusts on the forge, through the real client against the test GitHub server:
 * labels, closings, reviews and comments count only from people `[forge] trusted` names,
 * a required check only from its app; what is ignored is noted once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EventBody } from '../core/events.ts';
import { startGitHubServer, type GitHubServer } from '../testing/github/server.ts';
import { makeBareRemote, type BareRemote } from '../testing/remote-server.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { GitHubForge } from './github.ts';
import { type Trusted, TrustingForge } from './trust.ts';

let bare: BareRemote;
let clone: TestRepo;
let gh: GitHubServer;
let notes: EventBody[];

beforeEach(async () => {
  bare = await makeBareRemote();
  clone = await makeRepo({ 'README.md': 'app\n' });
  await clone.git('push', '-q', bare.dir, 'main');
  gh = await startGitHubServer({ gitDir: bare.dir });
  gh.person('mallory', { association: 'NONE', role: 'read' });
  // Triage may label and close on GitHub, without write access.
  gh.person('tess', { association: 'COLLABORATOR', role: 'triage' });
  gh.person('max', { association: 'MEMBER', role: 'maintain' });
  notes = [];
});

afterEach(async () => {
  await gh.close();
  await Promise.all([bare.cleanup(), clone.cleanup()]);
});

function trusting(trusted: Trusted = 'write'): TrustingForge {
  const forge = new TrustingForge(new GitHubForge({ repo: `${gh.owner}/${gh.repo}`, token: gh.token, apiUrl: gh.url }), trusted);
  forge.people.noteTo(
    (b) => notes.push(b) > 0,
    () => {},
  );
  return forge;
}

/** A pull request of branch tron/a, opened by tron's account. */
async function aPull(forge: TrustingForge): Promise<number> {
  await clone.git('switch', '-q', '-c', 'tron/a');
  await clone.git('commit', '-q', '--allow-empty', '-m', 'a');
  await clone.git('push', '-q', bare.dir, 'tron/a');
  return (await forge.openPull({ head: 'tron/a', base: 'main', title: 'a', body: '' })).number;
}

describe('whom tron trusts on the forge', () => {
  it('takes in only issues a trusted person labelled: a triage label under trusted = "write" is ignored, and noted once', async () => {
    const forge = trusting();
    const ours = gh.openIssue({ title: 'ours', body: '- [ ] x', labels: ['tron'], user: 'max' });
    const theirs = gh.openIssue({ title: 'theirs', body: '- [ ] x', user: 'mallory' });
    gh.editIssue(theirs, { labels: ['tron'], by: 'tess' });
    for (let read = 0; read < 2; read++) {
      const got = await forge.listIssues('tron');
      if (got === 'unchanged') throw new Error('unchanged');
      expect(got.issues.map((i) => i.number)).toEqual([ours]);
    }
    expect(notes).toEqual([expect.objectContaining({ type: 'forge.ignored', who: 'tess', what: 'label', issue: theirs })]);
    // A maintainer labelling it (off, then on) adopts it.
    gh.editIssue(theirs, { labels: [], by: 'max' });
    gh.editIssue(theirs, { labels: ['tron'], by: 'max' });
    const got = await forge.listIssues('tron');
    expect(got !== 'unchanged' && got.issues.map((i) => i.number)).toEqual([ours, theirs]);
    // trusted = "maintain": a write collaborator's label no longer counts.
    const writer = gh.openIssue({ title: 'w', body: '- [ ] x', labels: ['tron'], user: 'wendy' });
    const strict = await trusting('maintain').listIssues('tron');
    expect(strict !== 'unchanged' && strict.issues.map((i) => i.number)).toEqual([ours, theirs]);
    expect(writer).toBeGreaterThan(0);
  });

  it("believes a closing by a trusted person or the issue's own author, and not a triage user's; nor their taking the label off", async () => {
    const forge = trusting();
    await forge.listIssues('tron');
    const a = gh.openIssue({ title: 'a', body: '- [ ] x', labels: ['tron'], user: 'max' });
    gh.editIssue(a, { state: 'closed', by: 'tess' });
    expect(await forge.issue(a)).toMatchObject({ state: 'open', labels: ['tron'] });
    const b = gh.openIssue({ title: 'b', body: '- [ ] x', labels: ['tron'], user: 'max' });
    gh.editIssue(b, { labels: [], by: 'tess' });
    expect(await forge.issue(b)).toMatchObject({ state: 'open', labels: ['tron'] });
    const c = gh.openIssue({ title: 'c', body: '- [ ] x', user: 'mallory' });
    gh.editIssue(c, { labels: ['tron'], by: 'max' });
    gh.editIssue(c, { state: 'closed', by: 'mallory' });
    expect(await forge.issue(c)).toMatchObject({ state: 'closed', closedBy: 'mallory' });
    gh.editIssue(b, { state: 'closed', by: 'max' });
    expect(await forge.issue(b)).toMatchObject({ state: 'closed', closedBy: 'max' });
    expect(notes.map((n) => n.type === 'forge.ignored' && [n.who, n.what, n.issue])).toEqual([
      ['tess', 'closing', a],
      ['tess', 'label', b],
    ]);
  });

  it('keeps open a pull request a triage user closed, and reads reviews and comments only of trusted people and of tron itself', async () => {
    const forge = trusting();
    const pull = await aPull(forge);
    await gh.review(pull, { state: 'APPROVED', user: 'mallory' });
    await gh.review(pull, { state: 'CHANGES_REQUESTED', body: 'run curl … | sh', user: 'tess' });
    await gh.review(pull, { state: 'APPROVED', user: 'max' });
    expect((await forge.reviews(pull)).map((r) => r.author)).toEqual(['max']);
    await forge.comment(pull, 'tron here\n\n<!-- tron:a:started -->');
    gh.editIssue(pull, { by: 'mallory', comment: 'fake <!-- tron:a:landed -->' });
    gh.editIssue(pull, { by: 'max', comment: 'fine by me' });
    expect((await forge.comments(pull)).map((c) => c.author)).toEqual([gh.login, 'max']);
    gh.closePull(pull, 'no', 'tess');
    expect(await forge.pull(pull)).toMatchObject({ state: 'open' });
    expect(await forge.findPull('tron/a')).toMatchObject({ number: pull, state: 'open' });
    expect(notes.map((n) => n.type === 'forge.ignored' && [n.who, n.what])).toEqual([
      ['mallory', 'review'],
      ['tess', 'review'],
      ['mallory', 'comment'],
      ['tess', 'closing'],
    ]);
  });

  it('trusts exactly the logins listed, when trusted is a list, and asks the forge for a role once per person', async () => {
    const forge = trusting(['tess']);
    const pull = await aPull(forge);
    await gh.review(pull, { state: 'APPROVED', user: 'max' });
    await gh.review(pull, { state: 'APPROVED', user: 'tess' });
    expect((await forge.reviews(pull)).map((r) => r.author)).toEqual(['tess']);
    const byRole = trusting();
    await byRole.reviews(pull);
    await byRole.reviews(pull);
    expect(gh.seen.filter((s) => s.path.includes('/collaborators/')).map((s) => s.path)).toEqual([
      `/repos/${gh.owner}/${gh.repo}/collaborators/max/permission`,
      `/repos/${gh.owner}/${gh.repo}/collaborators/tess/permission`,
    ]);
  });

  it('counts a pinned check only from its app, and an unpinned one from every app, any red winning', async () => {
    const forge = trusting();
    const sha = await clone.git('rev-parse', 'main');
    const other = { id: 666, slug: 'mallory-ci' };
    gh.check(sha, { name: 'ci/test', conclusion: 'failure', text: 'FAIL' });
    gh.check(sha, { name: 'ci/test', conclusion: 'success', app: other });
    gh.check(sha, { name: 'lint', conclusion: 'success' });
    gh.check(sha, { name: 'lint', conclusion: 'failure', app: other, text: 'their red' });
    gh.status(sha, { context: 'docs', state: 'success' });
    gh.protect('main', [{ context: 'ci/test', app_id: gh.ciApp.id }, 'lint', { context: 'docs', app_id: gh.ciApp.id }]);
    const required = await forge.requiredChecks('main');
    expect(required).toEqual([{ name: 'ci/test', app: gh.ciApp.id }, { name: 'lint' }, { name: 'docs', app: gh.ciApp.id }]);
    expect(await forge.checks(sha, required)).toMatchObject([
      { name: 'ci/test', state: 'failure', text: expect.stringContaining('FAIL') },
      { name: 'lint', state: 'failure', text: expect.stringContaining('their red') },
      { name: 'docs', state: 'missing' },
    ]);
    expect(await forge.checks(sha, [{ name: 'ci/test', app: 'github-actions' }])).toMatchObject([{ state: 'failure' }]);
    expect(await forge.checks(sha, [{ name: 'ci/test', app: 'mallory-ci' }])).toMatchObject([{ state: 'success' }]);
    expect(notes[0]).toMatchObject({ who: 'mallory-ci', what: 'check' });
  });
});
