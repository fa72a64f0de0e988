/**
 * Buckets (spec 2.7, 4.5): the list with create and delete, a bucket's objects browsed by
 * prefix (folders grouped by `/`, bucket-listing.ts), download through a presigned GET,
 * delete, and upload straight from the browser through a presigned PUT (data.js asks
 * `/console/buckets/:name/presign`, which asks the spec's presign route, then PUTs the
 * file to the URL). CORS rules: bucket-cors.ts.
 *
 * The upload needs no CORS rule: the S3 gateway is path-style under `/s3` on pier's own
 * listener, the origin of the console too, so the browser's PUT is same-origin (and
 * `connect-src 'self'` allows it). The console therefore never changes a bucket's CORS
 * rules by itself; those stay the owner's, for other sites' pages.
 */
import type { ObjectPage, Presigned } from '../../contracts/buckets.js';
import { html, type Html } from '../html.js';
import { csrfField } from '../layout.js';
import { fragment, redirect, type PageContext } from '../router.js';
import { bucketCorsPages } from './bucket-cors.js';
import { groupByFolder, parentsOf } from './bucket-listing.js';
import type { PageFamily } from './family.js';
import { enc, ticked } from './form-values.js';
import { when, wide } from './widgets.js';

interface Bucket {
  id: string;
  name: string;
  createdAt: string;
}

export const bucketPath = (name: string, prefix = '') =>
  `/console/buckets/${enc(name)}${prefix ? `?prefix=${enc(prefix)}` : ''}`;

const createForm = (c: PageContext) =>
  html`<form method="post" action="/console/buckets" class="stack create-bucket">
    ${csrfField(c.session.csrf)}
    <label>New bucket name <input name="name" required /></label>
    <button type="submit" class="primary">Create bucket</button>
  </form>`;

function bucketsTable(c: PageContext, buckets: Bucket[]): Html {
  if (buckets.length === 0) return html`<p class="muted">No buckets yet.</p>`;
  return wide(
    html`<table class="buckets">
      <thead>
        <tr>
          <th>Bucket</th>
          <th>Created</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${buckets.map(
          (b) =>
            html`<tr data-bucket="${b.name}">
              <td><a href="${bucketPath(b.name)}">${b.name}</a></td>
              <td>${when(b.createdAt)}</td>
              <td>
                <form method="post" action="${bucketPath(b.name)}/delete" class="inline">
                  ${csrfField(c.session.csrf)}
                  <label class="check"
                    ><input type="checkbox" name="force" /> with its objects</label
                  >
                  <button type="submit" class="danger" data-confirm="Delete bucket ${b.name}?">
                    Delete
                  </button>
                </form>
              </td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

function objectActions(c: PageContext, bucket: string, key: string, prefix: string): Html {
  return html`<span class="actions">
    <form method="post" action="${bucketPath(bucket)}/download">
      ${csrfField(c.session.csrf)}<input type="hidden" name="key" value="${key}" />
      <button type="submit" data-action="download">Download</button>
    </form>
    <form method="post" action="${bucketPath(bucket)}/objects/delete">
      ${csrfField(c.session.csrf)}<input type="hidden" name="key" value="${key}" />
      <input type="hidden" name="prefix" value="${prefix}" />
      <button type="submit" class="danger" data-action="delete" data-confirm="Delete ${key}?">
        Delete
      </button>
    </form>
  </span>`;
}

function objectsTable(c: PageContext, bucket: string, prefix: string, page: ObjectPage): Html {
  const { folders, files } = groupByFolder(prefix, page.objects);
  if (folders.length === 0 && files.length === 0)
    return html`<p class="muted">No objects${prefix ? ' under this prefix' : ''}.</p>`;
  return wide(
    html`<table class="objects">
      <thead>
        <tr>
          <th>Key</th>
          <th>Size (bytes)</th>
          <th>Last modified</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${folders.map(
          (f) =>
            html`<tr class="folder">
              <td><a href="${bucketPath(bucket, f)}">${f.slice(prefix.length)}</a></td>
              <td></td>
              <td></td>
              <td></td>
            </tr>`,
        )}
        ${files.map(
          (o) =>
            html`<tr data-key="${o.key}">
              <td>${o.key.slice(prefix.length)}</td>
              <td>${o.sizeBytes}</td>
              <td>${when(o.lastModified)}</td>
              <td>${objectActions(c, bucket, o.key, prefix)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`,
  );
}

function breadcrumb(bucket: string, prefix: string): Html {
  return html`<p class="breadcrumb">
    <a href="${bucketPath(bucket)}">${bucket}</a>
    ${parentsOf(prefix).map(
      (p) => html` / <a href="${bucketPath(bucket, p)}">${p.slice(0, -1).split('/').pop()}</a>`,
    )}
  </p>`;
}

const uploadForm = (c: PageContext, bucket: string, prefix: string) =>
  html`<form
    class="stack upload-object"
    data-presign="${bucketPath(bucket)}/presign"
    data-prefix="${prefix}"
  >
    ${csrfField(c.session.csrf)}
    <label>Files <input type="file" name="file" multiple required /></label>
    <label
      >Key (optional, one file only; default: the file's name) under <code>${prefix || '/'}</code>
      <input name="key"
    /></label>
    <button type="submit" class="primary">Upload</button>
    <div class="upload-status" aria-live="polite"></div>
  </form>`;

export const bucketsFamily: PageFamily = {
  nav: [{ key: 'buckets', label: 'Buckets', href: '/console/buckets' }],
  register(router) {
    router.page('/console/buckets', async (c) => {
      const buckets = await c.api.call<Bucket[]>('GET', '/v1/buckets');
      return {
        title: 'Buckets',
        nav: 'buckets',
        styles: [c.assets.url('data.css')],
        body: html`${bucketsTable(c, buckets)} ${createForm(c)}`,
        commands: [
          { pier: 'pier buckets list', method: 'GET', path: '/v1/buckets' },
          {
            pier: 'pier buckets create <name>',
            method: 'POST',
            path: '/v1/buckets',
            body: { name: '<name>' },
          },
        ],
      };
    });

    router.action('/console/buckets', async (c) => {
      const name = c.form.name ?? '';
      await c.api.call('POST', '/v1/buckets', { body: { name } });
      return redirect(bucketPath(name));
    });

    router.action('/console/buckets/:name/delete', async (c) => {
      const force = ticked(c.form.force) ? 'true' : undefined;
      await c.api.call('DELETE', `/v1/buckets/${enc(c.params.name!)}`, { query: { force } });
      return redirect('/console/buckets');
    });

    router.page('/console/buckets/:name', async (c) => {
      const name = c.params.name!;
      const prefix = c.query.prefix ?? '';
      const query = { limit: '1000', prefix: prefix || undefined, cursor: c.query.cursor };
      const page = await c.api.call<ObjectPage>('GET', `/v1/buckets/${enc(name)}/objects`, {
        query,
      });
      const more = page.nextCursor
        ? html`<p>
            <a href="${bucketPath(name, prefix)}${prefix ? '&' : '?'}cursor=${enc(page.nextCursor)}"
              >More objects</a
            >
          </p>`
        : '';
      const listPath = `/v1/buckets/${enc(name)}/objects${prefix ? `?prefix=${enc(prefix)}` : ''}`;
      return {
        title: `Bucket ${name}`,
        nav: 'buckets',
        styles: [c.assets.url('data.css')],
        body: html`${breadcrumb(name, prefix)}
          <p><a href="${bucketPath(name)}/cors">CORS rules</a></p>
          ${objectsTable(c, name, prefix, page)} ${more}
          <h2>Upload</h2>
          ${uploadForm(c, name, prefix)}`,
        commands: [
          {
            pier: `pier buckets ls ${name}${prefix ? ` --prefix ${prefix}` : ''}`,
            method: 'GET',
            path: listPath,
          },
          {
            pier: `pier buckets presign ${name} <key> --put`,
            method: 'POST',
            path: `/v1/buckets/${enc(name)}/presign`,
            body: { op: 'put', key: '<key>' },
          },
          {
            pier: `pier buckets rm ${name} <key>`,
            method: 'DELETE',
            path: `/v1/buckets/${enc(name)}/objects?key=<key>`,
          },
        ],
        scripts: [c.assets.url('data.js')],
      };
    });

    // For data.js: a presigned PUT, as data attributes of a fragment (a refusal comes back
    // as the usual refusal fragment, which data.js shows in place).
    router.action('/console/buckets/:name/presign', async (c) => {
      const body: Record<string, unknown> = { op: 'put', key: c.form.key ?? '' };
      if (c.form.contentType) body.contentType = c.form.contentType;
      const signed = await c.api.call<Presigned>(
        'POST',
        `/v1/buckets/${enc(c.params.name!)}/presign`,
        { body },
      );
      return fragment(
        html`<div
          data-presigned-url="${signed.url}"
          data-headers="${JSON.stringify(signed.requiredHeaders)}"
        ></div>`,
      );
    });

    // A form post (CSRF-checked), answered with a redirect to a presigned GET: the link is
    // made when asked for, so it is fresh, and none sits in the page for its lifetime.
    router.action('/console/buckets/:name/download', async (c) => {
      const signed = await c.api.call<Presigned>(
        'POST',
        `/v1/buckets/${enc(c.params.name!)}/presign`,
        { body: { op: 'get', key: c.form.key ?? '' } },
      );
      return redirect(signed.url);
    });

    router.action('/console/buckets/:name/objects/delete', async (c) => {
      const name = c.params.name!;
      await c.api.call('DELETE', `/v1/buckets/${enc(name)}/objects`, {
        query: { key: c.form.key ?? '' },
      });
      return redirect(bucketPath(name, c.form.prefix ?? ''));
    });

    bucketCorsPages(router);
  },
};
