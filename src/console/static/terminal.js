/*
 * The browser terminal: xterm.js on the console's shell WebSocket, which relays to
 * `GET /v1/machines/:id/exec`. Frames as that route takes them: stdin as binary
 * [0, ...bytes]; resize as text {"type":"resize","cols","rows"}; stdout/stderr arrive as
 * binary [1|2, ...bytes]; `exit` and `error` as text JSON.
 */
/* global document, window, Terminal, FitAddon, WebSocket, TextEncoder, CSSStyleSheet, MutationObserver */
'use strict';

/*
 * xterm.js writes its colours and cell sizes into <style> elements, which the strict CSP
 * (style-src 'self', no 'unsafe-inline') blocks. Constructed style sheets are not inline
 * styles: mirror each such element's text into one, adopted by the document.
 */
function mirrorStyles(root) {
  const sheets = new Map();
  const sync = () => {
    for (const el of root.querySelectorAll('style')) {
      let sheet = sheets.get(el);
      if (!sheet) {
        sheet = new CSSStyleSheet();
        sheets.set(el, sheet);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
      }
      if (sheet.lastText !== el.textContent) {
        sheet.replaceSync(el.textContent);
        sheet.lastText = el.textContent;
      }
    }
  };
  new MutationObserver(sync).observe(root, { subtree: true, childList: true, characterData: true });
  sync();
}

function start(box) {
  const status = document.getElementById('terminal-status');
  const say = (text) => {
    if (status) status.textContent = text;
  };
  mirrorStyles(box);
  const term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 14 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();

  const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = `${proto}//${window.location.host}${box.dataset.wsPath}?cols=${term.cols}&rows=${term.rows}`;
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  const encoder = new TextEncoder();
  say('connecting…');

  ws.addEventListener('open', () => {
    say('connected');
    box.dataset.state = 'open';
    term.focus();
  });
  ws.addEventListener('message', (event) => {
    if (typeof event.data === 'string') {
      const msg = JSON.parse(event.data);
      if (msg.type === 'exit') say(`exited (${msg.code ?? msg.signal})`);
      if (msg.type === 'error') say(`refused: ${msg.error} (${msg.code})`);
      return;
    }
    const bytes = new Uint8Array(event.data);
    if (bytes.length > 1) term.write(bytes.subarray(1));
  });
  ws.addEventListener('close', () => {
    box.dataset.state = 'closed';
    if (status && status.textContent === 'connected') say('closed');
  });

  term.onData((text) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const data = encoder.encode(text);
    const frame = new Uint8Array(data.length + 1);
    frame[0] = 0;
    frame.set(data, 1);
    ws.send(frame);
  });
  term.onResize(({ cols, rows }) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  });
  window.addEventListener('resize', () => fit.fit());
}

document.addEventListener('DOMContentLoaded', () => {
  const box = document.getElementById('terminal');
  if (box) start(box);
});
