/* The console's behaviour, loaded on every page (no inline script: the CSP forbids it). */
/* global document, window, fetch, TextDecoder */
'use strict';

// A form or button with data-confirm asks first (destroying a machine, revoking a key).
document.addEventListener(
  'submit',
  (event) => {
    const form = event.target;
    const button = event.submitter;
    const question =
      (button && button.getAttribute('data-confirm')) || form.getAttribute('data-confirm');
    if (question && !window.confirm(question)) event.preventDefault();
  },
  true,
);

// A followed log keeps its newest line in view, unless the reader scrolled up.
document.addEventListener('htmx:beforeSwap', (event) => {
  const box = event.detail.target && event.detail.target.closest('.log-lines');
  if (box) box.dataset.stick = String(box.scrollTop + box.clientHeight >= box.scrollHeight - 8);
});
document.addEventListener('htmx:afterSwap', (event) => {
  const box = event.detail.target && event.detail.target.closest('.log-lines');
  if (box && box.dataset.stick !== 'false') box.scrollTop = box.scrollHeight;
});

// A build's log while the build runs: `data-follow` streams the whole log again from its
// start until the build ends (the route's follow=1), replacing what the page was served.
async function followLog(box) {
  const url = box.getAttribute('data-follow');
  box.removeAttribute('data-follow');
  try {
    const res = await fetch(url, { credentials: 'same-origin' });
    if (!res.ok || !res.body) throw new Error(`the log answered ${res.status}`);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      text += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const stick = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
      box.textContent = text;
      if (stick) box.scrollTop = box.scrollHeight;
      if (done) break;
    }
    box.dataset.state = 'ended';
  } catch (err) {
    box.dataset.state = 'broken';
    box.title = String(err);
  }
}
document.addEventListener('DOMContentLoaded', () => {
  for (const box of document.querySelectorAll('pre[data-follow]')) void followLog(box);
});
