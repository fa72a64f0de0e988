/**
 * A console visitor without a browser, for the integration tests: real HTTP to a test
 * platform, a cookie jar of one cookie, and the CSRF token read off the last page.
 */
import type { TestPlatform } from '../helpers/platform.js';

export interface PageAnswer {
  status: number;
  headers: Headers;
  text: string;
}

export const PASSWORD = 'a long enough console password';

/** Adds a person with a console password to an organization. */
export async function addPerson(tp: TestPlatform, orgId: string, email: string, role = 'admin') {
  const res = await tp.admin('POST', `/admin/v1/orgs/${orgId}/users`, {
    email,
    password: PASSWORD,
    role,
  });
  if (res.status !== 201) throw new Error(`user create failed: ${res.status}`);
  return res.body;
}

export class ConsoleVisitor {
  cookie: string | undefined;

  constructor(readonly tp: TestPlatform) {}

  get key(): string | undefined {
    return this.cookie ? decodeURIComponent(this.cookie.split('=')[1]!) : undefined;
  }

  async get(path: string, headers: Record<string, string> = {}): Promise<PageAnswer> {
    return this.send('GET', path, undefined, headers);
  }

  /** Posts a form as a browser would: same Origin, urlencoded. */
  async post(
    path: string,
    form: Record<string, string>,
    headers: Record<string, string> = { origin: this.tp.url },
  ): Promise<PageAnswer> {
    return this.send('POST', path, new URLSearchParams(form).toString(), {
      'content-type': 'application/x-www-form-urlencoded',
      ...headers,
    });
  }

  async signIn(email: string, password = PASSWORD): Promise<PageAnswer> {
    return this.post('/console/sign-in', { email, password, next: '/console/apps' });
  }

  /** The CSRF token of the signed-in session, read off a page. */
  async csrf(): Promise<string> {
    const page = await this.get('/console/apps');
    const m = /name="_csrf" value="([^"]+)"/.exec(page.text);
    if (!m) throw new Error(`no CSRF token on the page (${page.status})`);
    return m[1]!;
  }

  private async send(
    method: string,
    path: string,
    body: string | undefined,
    headers: Record<string, string>,
  ): Promise<PageAnswer> {
    const res = await fetch(this.tp.url + path, {
      method,
      body,
      redirect: 'manual',
      headers: { ...(this.cookie ? { cookie: this.cookie } : {}), ...headers },
    });
    const set = res.headers.get('set-cookie');
    if (set) {
      const pair = set.split(';')[0]!;
      this.cookie = pair.endsWith('=') ? undefined : pair;
    }
    return { status: res.status, headers: res.headers, text: await res.text() };
  }
}
