/**
 * An app's Git settings (issue #26; docs/api.md "git push"): `GET /v1/apps/:name/git`
 * reads which branch deploys the app, whether other branches deploy previews, and where
 * to push; `PUT` changes the first two. Reading is `read` (R, AA); changing is
 * deploy-level (D, AW), as making previews and deploying are: a `deploy:<app>` key or an
 * agent token for the app may, a read-only key or another app's may not.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { appParams } from '../../../contracts/apps.js';
import { appGitSchema, setAppGitBody } from '../../../contracts/git.js';
import { getAppGit, setAppGit } from '../../../services/git/settings.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

const tags = ['git'];

export function gitSettingsRoutes(root: FastifyInstance, { ctx, sshGateway }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.get('/v1/apps/:name/git', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "The app's Git settings: its production branch, branch previews, push URLs",
      params: appParams,
      response: { 200: appGitSchema },
    },
    handler: async (req) => getAppGit(ctx, sshGateway, principalOf(req).orgId, req.params.name),
  });

  app.put('/v1/apps/:name/git', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Set the production branch (null: main or master) and whether branches preview',
      params: appParams,
      body: setAppGitBody,
      response: { 200: appGitSchema },
    },
    handler: async (req) =>
      setAppGit(ctx, sshGateway, principalOf(req).orgId, req.params.name, req.body),
  });
}
