/** The operator API's bearer: from config, else generated once into DATA_DIR/operator-token. */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBase62 } from '../crypto/tokens.js';

export async function loadOperatorToken(dataDir: string, configured?: string): Promise<string> {
  if (configured) return configured;
  const file = path.join(dataDir, 'operator-token');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const token = `pierop_${randomBase62(43)}`;
  await writeFile(file, token + '\n', { mode: 0o600, flag: 'wx' });
  return token;
}
