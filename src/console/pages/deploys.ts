/**
 * An app's deploys page (CONTRACT 7, issue #25 item 7): its builds with their state and
 * the log of one of them, followed live (console.js streams the build log route with
 * `follow=1` through `/console/builds/:id/log`); its deploys with status and step; its
 * releases; a "Deploy" button on a finished build and a "Roll back to vN" button on the
 * release live before the current one. The lists refresh themselves (htmx) while
 * something is in progress. Every read and action is the `/v1` route's.
 */
import type { Readable } from 'node:stream';
import type { Build } from '../../contracts/builds.js';
import type { Deploy, Release } from '../../contracts/deploys.js';
import { Refusal } from '../api.js';
import { html, type Html } from '../html.js';
import { csrfField, errorBox } from '../layout.js';
import { fragment, redirect, type PageContext } from '../router.js';
import { appPath } from './apps.js';
import type { PageFamily } from './family.js';
import { when, wide } from './widgets.js';

const enc = encodeURIComponent;
const deploysPath = (app: string) => `${appPath(app)}/deploys`;
const buildEnded = (b: Build) => b.state === 'done' || b.state === 'failed';
const deployEnded = (d: Deploy) => d.status === 'done' || d.status === 'error';

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * One part of the page from its route: a refusal (a rate limit, …) shows in its place and
 * leaves the rest of the page working; an ended key still goes to sign-in.
 */
async function section(load: () => Promise<Html>): Promise<Html> {
  try {
    return await load();
  } catch (err) {
    if (err instanceof Refusal && err.status !== 401) return errorBox(err);
    throw err;
  }
}

const shortDigest = (digest: string | undefined) =>
  digest ? html`<code title="${digest}">${digest.slice(0, 19)}</code>` : html``;

function buildsTable(c: PageContext, app: string, builds: Build[], shown?: string): Html {
  if (builds.length === 0) {
    return html`<p class="muted">
      No builds yet: <code>pier deploy</code> in the app’s directory uploads and builds it.
    </p>`;
  }
  return wide(
    html`<table class="builds">
      <thead>
        <tr>
          <th>Build</th>
          <th></th>
          <th>State</th>
          <th>Builder</th>
          <th>Created</th>
          <th>Finished</th>
          <th>Image or error</th>
        </tr>
      </thead>
      <tbody>
        ${builds.map(
          (b) =>
            html`<tr data-build="${b.id}" class="${b.id === shown ? 'current' : ''}">
              <td><a href="${deploysPath(app)}?build=${enc(b.id)}#build-log">${b.id}</a></td>
              <td>
                ${
                  b.state === 'done'
                    ? html`<form method="post" action="${deploysPath(app)}" class="deploy-build">
                        ${csrfField(c.session.csrf)}
                        <input type="hidden" name="image" value="build:${b.id}" />
                        <button type="submit">Deploy</button>
                      </form>`
                    : ''
                }
              </td>
              <td class="state state-${b.state}">${b.state}</td>
              <td>${b.builder ?? '—'}</td>
              <td>${when(b.createdAt)}</td>
              <td>${when(b.finishedAt)}</td>
              <td>
                ${b.error ? html`<span class="state-failed">${b.error}</span>` : shortDigest(b.imageDigest)}
              </td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

/** The builds table, polled while a build is queued or building. */
function liveBuilds(c: PageContext, app: string, builds: Build[], shown?: string): Html {
  const polling = builds.some((b) => !buildEnded(b));
  const q = shown ? `?build=${enc(shown)}` : '';
  return html`<div
    id="builds"
    ${
      polling
        ? html`hx-get="${deploysPath(app)}/builds${q}" hx-trigger="every 2s" hx-swap="outerHTML"`
        : ''
    }
  >
    ${buildsTable(c, app, builds, shown)}
  </div>`;
}

/** The log of one build as it is now; console.js follows it on while the build runs. */
async function buildLog(c: PageContext, build: Build): Promise<Html> {
  const log = await text(await c.api.stream(`/v1/builds/${enc(build.id)}/logs`));
  const follow = buildEnded(build) ? '' : `/console/builds/${enc(build.id)}/log`;
  return html`<h3>Log of build <code>${build.id}</code></h3>
    <pre
      class="log-lines build-log"
      id="build-log"
      data-build="${build.id}"
      data-state="${follow ? 'following' : 'ended'}"
      ${follow ? html`data-follow="${follow}"` : ''}
    >
${log}</pre>`;
}

function deploysTable(deploys: Deploy[], highlighted?: string): Html {
  if (deploys.length === 0) return html`<p class="muted">No deploys yet.</p>`;
  return wide(
    html`<table class="deploys">
      <thead>
        <tr>
          <th>Deploy</th>
          <th>Status</th>
          <th>Step</th>
          <th>Image</th>
          <th>Release</th>
          <th>Created</th>
          <th>Finished</th>
          <th>Error</th>
        </tr>
      </thead>
      <tbody>
        ${deploys.map(
          (d) =>
            html`<tr data-deploy="${d.id}" class="${d.id === highlighted ? 'current' : ''}">
              <td>${d.id}</td>
              <td class="state state-${d.status}">${d.status}</td>
              <td>${d.step ?? '—'}</td>
              <td>
                <code>${d.image}</code>${
                  d.rollbackOf
                    ? html` <span class="muted">(rollback to v${d.rollbackOf})</span>`
                    : ''
                }
              </td>
              <td>${d.release === undefined ? '—' : `v${d.release}`}</td>
              <td>${when(d.createdAt)}</td>
              <td>${when(d.finishedAt)}</td>
              <td>${d.error ? html`<span class="state-failed">${d.error}</span>` : ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

/**
 * The release a rollback goes to by default: the newest one that was live before the
 * live one (the route's own default when no version is given).
 */
export function previousLive(releases: Release[]): Release | undefined {
  const live = releases.find((r) => r.status === 'live');
  if (!live) return undefined;
  return releases
    .filter((r) => r.version < live.version && r.liveAt !== undefined)
    .sort((a, b) => b.version - a.version)[0];
}

function releasesTable(c: PageContext, app: string, releases: Release[]): Html {
  if (releases.length === 0) return html`<p class="muted">No releases yet.</p>`;
  const target = previousLive(releases);
  return wide(
    html`<table class="releases">
      <thead>
        <tr>
          <th>Version</th>
          <th>Status</th>
          <th></th>
          <th>Image</th>
          <th>Build</th>
          <th>Live since</th>
          <th>Created</th>
        </tr>
      </thead>
      <tbody>
        ${releases.map(
          (r) =>
            html`<tr data-version="${String(r.version)}">
              <td>v${r.version}</td>
              <td class="state state-${r.status}">${r.status}</td>
              <td>
                ${
                  r === target
                    ? html`<form
                        method="post"
                        action="${deploysPath(app)}/rollback"
                        class="rollback"
                      >
                        ${csrfField(c.session.csrf)}
                        <input type="hidden" name="version" value="${String(r.version)}" />
                        <button type="submit">Roll back to v${r.version}</button>
                      </form>`
                    : ''
                }
              </td>
              <td><code>${r.image}</code><br />${shortDigest(r.imageDigest)}</td>
              <td>
                ${
                  r.build
                    ? html`<a href="${deploysPath(app)}?build=${enc(r.build)}#build-log"
                        >${r.build}</a
                      >`
                    : '—'
                }
              </td>
              <td>${when(r.liveAt)}</td>
              <td>${when(r.createdAt)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

/** Deploys and releases, polled while a deploy is pending or running. */
async function liveDeploys(c: PageContext, app: string, highlighted?: string): Promise<Html> {
  const [deploys, releases] = await Promise.all([
    c.api.call<Deploy[]>('GET', `/v1/apps/${enc(app)}/deploys`),
    c.api.call<Release[]>('GET', `/v1/apps/${enc(app)}/releases`),
  ]);
  const polling = deploys.some((d) => !deployEnded(d));
  const q = highlighted ? `?deploy=${enc(highlighted)}` : '';
  return html`<div
    id="deploys"
    ${
      polling
        ? html`hx-get="${deploysPath(app)}/deploys${q}" hx-trigger="every 2s" hx-swap="outerHTML"`
        : ''
    }
  >
    <h2>Deploys</h2>
    ${deploysTable(deploys, highlighted)}
    <h2>Releases</h2>
    ${releasesTable(c, app, releases)}
  </div>`;
}

export const deploysFamily: PageFamily = {
  nav: [],
  register(router) {
    router.page('/console/apps/:name/deploys', async (c) => {
      const name = c.params.name!;
      // Read first: another organization's app is a 404 page, like a missing one.
      await c.api.call('GET', `/v1/apps/${enc(name)}`);
      const builds = await c.api.call<Build[]>('GET', `/v1/apps/${enc(name)}/builds`);
      const shown = builds.find((b) => b.id === c.query.build) ?? builds[0];
      return {
        title: `Deploys of ${name}`,
        nav: 'apps',
        body: html`<p>App <a href="${appPath(name)}">${name}</a></p>
          <h2>Builds</h2>
          ${liveBuilds(c, name, builds, shown?.id)}
          ${shown ? await section(() => buildLog(c, shown)) : ''}
          ${await section(() => liveDeploys(c, name, c.query.deploy))}`,
        commands: [
          { pier: `pier deploy`, method: 'POST', path: `/v1/apps/${enc(name)}/sources` },
          { method: 'GET', path: `/v1/apps/${enc(name)}/builds` },
          ...(shown
            ? [
                {
                  pier: `pier builds logs ${shown.id}`,
                  method: 'GET',
                  path: `/v1/builds/${enc(shown.id)}/logs?follow=1`,
                },
              ]
            : []),
          { method: 'GET', path: `/v1/apps/${enc(name)}/deploys` },
          { pier: 'pier releases', method: 'GET', path: `/v1/apps/${enc(name)}/releases` },
          { pier: 'pier rollback', method: 'POST', path: `/v1/apps/${enc(name)}/rollback` },
        ],
      };
    });

    router.page('/console/apps/:name/deploys/builds', async (c) => {
      const name = c.params.name!;
      const builds = await c.api.call<Build[]>('GET', `/v1/apps/${enc(name)}/builds`);
      return fragment(liveBuilds(c, name, builds, c.query.build));
    });

    router.page('/console/apps/:name/deploys/deploys', async (c) =>
      fragment(await liveDeploys(c, c.params.name!, c.query.deploy)),
    );

    // The build's log as the builder writes it, until the build ends (console.js reads it).
    router.page('/console/builds/:id/log', async (c) => ({
      stream: await c.api.stream(`/v1/builds/${enc(c.params.id!)}/logs`, {
        query: { follow: '1' },
      }),
      type: 'text/plain; charset=utf-8',
    }));

    router.action('/console/apps/:name/deploys', async (c) => {
      const name = c.params.name!;
      const deploy = await c.api.call<Deploy>('POST', `/v1/apps/${enc(name)}/deploys`, {
        body: { image: c.form.image ?? '' },
      });
      return redirect(`${deploysPath(name)}?deploy=${enc(deploy.id)}#deploys`);
    });

    router.action('/console/apps/:name/deploys/rollback', async (c) => {
      const name = c.params.name!;
      const version = c.form.version?.trim();
      // A version that is not a number goes to the route as is: its 400 names the field.
      const body = version ? { version: /^\d+$/.test(version) ? Number(version) : version } : {};
      const deploy = await c.api.call<Deploy>('POST', `/v1/apps/${enc(name)}/rollback`, { body });
      return redirect(`${deploysPath(name)}?deploy=${enc(deploy.id)}#deploys`);
    });
  },
};
