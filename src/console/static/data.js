/* The data pages' behaviour (buckets, databases, tokens): no inline script, the CSP forbids it. */
/* global document, fetch, DOMParser, URLSearchParams, window */
'use strict';

// Moment pickers (pages/widgets.ts): send the browser's offset from UTC with the local time,
// so the server reads the moment the person meant.
function fillOffsets() {
  for (const input of document.querySelectorAll('input.tz-offset')) {
    input.value = String(new Date().getTimezoneOffset());
  }
  for (const note of document.querySelectorAll('.tz-note')) note.textContent = '(your local time)';
}

// Upload straight from the browser: ask the console (which asks POST /v1/buckets/:name/presign)
// for a presigned PUT of each file, then PUT the bytes to that URL. The bytes never pass
// through the console's pages; the gateway checks the signature.
async function presign(form, key, contentType) {
  const fields = new URLSearchParams({ key });
  if (contentType) fields.set('contentType', contentType);
  const res = await fetch(form.dataset.presign, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-csrf-token': form.querySelector('input[name=_csrf]').value,
      'hx-request': 'true',
    },
    body: fields,
    credentials: 'same-origin',
  });
  const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
  const signed = doc.querySelector('[data-presigned-url]');
  if (!signed) return { refusal: doc.body };
  return {
    url: signed.getAttribute('data-presigned-url'),
    headers: JSON.parse(signed.getAttribute('data-headers') || '{}'),
  };
}

function say(status, text, bad) {
  status.replaceChildren();
  const p = document.createElement('p');
  p.className = bad ? 'refusal' : 'notice';
  p.textContent = text;
  status.append(p);
}

async function upload(form) {
  const status = form.querySelector('.upload-status');
  const files = form.querySelector('input[type=file]').files;
  const named = form.querySelector('input[name=key]').value.trim();
  if (files.length === 0) return say(status, 'Choose a file first.', true);
  for (const file of files) {
    const key = (form.dataset.prefix || '') + (files.length === 1 && named ? named : file.name);
    say(status, `Uploading ${key}…`, false);
    const signed = await presign(form, key, file.type);
    if (signed.refusal) {
      status.replaceChildren(...signed.refusal.childNodes);
      return;
    }
    const put = await fetch(signed.url, { method: 'PUT', headers: signed.headers, body: file });
    if (!put.ok)
      return say(status, `Upload of ${key} failed: ${put.status} ${await put.text()}`, true);
  }
  say(status, 'Uploaded.', false);
  window.location.reload();
}

document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!form.matches || !form.matches('form.upload-object')) return;
  event.preventDefault();
  upload(form).catch((err) => say(form.querySelector('.upload-status'), String(err), true));
});

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', fillOffsets);
else fillOffsets();
document.addEventListener('htmx:afterSwap', fillOffsets);
