/**
 * The small sign-in page a password-protected app shows browsers (alongside the HTTP
 * Basic challenge): it posts the password to `/.pier/login` on the app's own host, which
 * sets the access cookie and sends the browser on to `next`.
 */

/** The path on a protected app's host that takes the form's password. */
export const LOGIN_PATH = '/.pier/login';

const escape = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

export const WRONG_PASSWORD = 'That password is not right.';

/** The form; `notice` (a wrong password, too many tries) is shown above it. */
export function passwordForm(app: string, next: string, notice = ''): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${escape(app)}: password</title>
<style>body{font:16px system-ui,sans-serif;max-width:22rem;margin:15vh auto;padding:0 1rem}
input,button{font:inherit;padding:.4rem;width:100%;box-sizing:border-box;margin:.3rem 0}</style>
</head><body>
<h1>${escape(app)}</h1>
<p>This app is protected by a password.</p>
${notice ? `<p role="alert"><strong>${escape(notice)}</strong></p>` : ''}
<form method="post" action="${LOGIN_PATH}">
<input type="hidden" name="next" value="${escape(next)}">
<label>Password <input type="password" name="password" autocomplete="current-password" autofocus required></label>
<button type="submit">Continue</button>
</form>
</body></html>
`;
}
