/**
 * Key scopes (spec 2.1, 5.3) and what they reach. A key without scopes is full access;
 * a key with scopes reaches only what one of them covers. What a scope may be written as
 * is `scopeSchema` in src/contracts/tokens.ts.
 */

/** F = full-access key; R = full or scope `read`; D = full, `deploy` or `deploy:<app>`. */
export type Access = 'F' | 'R' | 'D';

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
