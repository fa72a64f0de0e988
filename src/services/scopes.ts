/**
 * Key scopes (spec 2.1, 5.3) and what they reach. A key without scopes is full access;
 * a key with scopes reaches only what one of them covers.
 */
import { z } from 'zod';
import type { Access } from '../http/route-auth.js';

const domain = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;
const app = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export const scopeSchema = z
  .string()
  .refine(
    (s) =>
      s === 'read' ||
      s === 'deploy' ||
      s === 'mail:send' ||
      (s.startsWith('deploy:') && app.test(s.slice(7))) ||
      (s.startsWith('mail:send:') && domain.test(s.slice(10))),
    { message: 'must be read, deploy, deploy:<app>, mail:send or mail:send:<domain>' },
  );

/** Whether a key with `scopes` may use a route open to `access`, for `appName`. */
export function scopesCover(scopes: string[] | null, access: Access[], appName?: string): boolean {
  if (scopes === null) return true;
  return access.some((a) => {
    if (a === 'R') return scopes.includes('read');
    if (a === 'D') {
      return (
        scopes.includes('deploy') || (appName !== undefined && scopes.includes(`deploy:${appName}`))
      );
    }
    return false;
  });
}

/** The sentence of a `token-scope` refusal, naming what the route needs. */
export function neededScopeSentence(access: Access[], appName?: string): string {
  const options: string[] = [];
  if (access.includes('R')) options.push('`read`');
  if (access.includes('D')) options.push('`deploy`', `\`deploy:${appName ?? '<app>'}\``);
  if (options.length === 0) return 'This route needs a full-access key (a key without scopes).';
  return `This route needs a full-access key or the scope ${options.join(' or ')}.`;
}
