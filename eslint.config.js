// Lint rules: the recommended sets of ESLint and typescript-eslint, plus a few that catch
// the mistakes this codebase cares about (floating promises would lose errors silently).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeGlobals = { process: 'readonly', console: 'readonly', URL: 'readonly' };

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.test-results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { files: ['**/*.js'], languageOptions: { globals: nodeGlobals } },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // Tests read arbitrary JSON answers; typing every body would only add noise.
    files: ['test/**/*.ts', '**/*.test.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
