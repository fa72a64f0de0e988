/* The console's behaviour, loaded on every page (no inline script: the CSP forbids it). */
/* global document, window */
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
