/**
 * Detect (CONTRACT 7 `POST /v1/apps/:name/detect`): what kind of app a source tree is,
 * and the Dockerfile pier builds it with when it brings none. A Dockerfile in the tree
 * wins; otherwise, in this order: a Go module (go.mod), a Node app (package.json), a
 * Python app (requirements.txt or pyproject.toml), a static site (index.html). The
 * generated Dockerfiles build on the operator's base images (PIER_DETECT_IMAGE_*).
 */
import type { Detection } from '../../contracts/builds.js';
import { ApiError } from '../../errors/api-error.js';
import { readTopLevel } from '../../runtime/builds/source-archive.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { findSource, sourceFile } from './records.js';

type Images = ServiceContext['config']['detectImages'];

const WANTED = new Set([
  'package.json',
  'requirements.txt',
  'pyproject.toml',
  'go.mod',
  'index.html',
]);

const NODE_PORT = 3000;
const PYTHON_PORT = 8000;
const GO_PORT = 8080;
const STATIC_PORT = 8080;

/** A JSON string for a Dockerfile's exec form. */
const q = (s: string) => JSON.stringify(s);

function node(files: Map<string, string>, names: Set<string>, images: Images): Detection {
  const notes: string[] = [];
  let pkg: {
    scripts?: Record<string, unknown>;
    main?: unknown;
    engines?: { node?: unknown };
    dependencies?: Record<string, unknown>;
  } = {};
  try {
    pkg = JSON.parse(files.get('package.json') ?? '{}') as typeof pkg;
  } catch {
    notes.push('package.json is not valid JSON; built as a plain Node app.');
  }
  if (typeof pkg.engines?.node === 'string') {
    notes.push(`engines.node is "${pkg.engines.node}"; the base image is ${images.node}.`);
  }
  let install: string | undefined;
  const hasDeps = Object.keys(pkg.dependencies ?? {}).length > 0;
  if (names.has('package-lock.json') || names.has('npm-shrinkwrap.json')) {
    install = 'npm ci --omit=dev';
    notes.push('package-lock.json: dependencies installed with npm ci.');
  } else if (names.has('yarn.lock')) {
    install = 'yarn install --frozen-lockfile --production';
    notes.push('yarn.lock: dependencies installed with yarn.');
  } else if (names.has('pnpm-lock.yaml')) {
    install = 'corepack enable && pnpm install --frozen-lockfile --prod';
    notes.push('pnpm-lock.yaml: dependencies installed with pnpm.');
  } else if (hasDeps) {
    install = 'npm install --omit=dev';
    notes.push(
      'No lock file: dependencies installed with npm install (pin them with a lock file).',
    );
  }
  let start: string;
  if (typeof pkg.scripts?.start === 'string') {
    start = 'npm start';
    notes.push(`The start script: ${pkg.scripts.start}`);
  } else {
    const main =
      typeof pkg.main === 'string' ? pkg.main : names.has('server.js') ? 'server.js' : 'index.js';
    start = `node ${main}`;
    notes.push(`No start script: runs ${main}.`);
  }
  const lines = [
    `FROM ${images.node}`,
    'WORKDIR /app',
    'ENV NODE_ENV=production',
    ...(install ? ['COPY package*.json yarn.lock* pnpm-lock.yaml* ./', `RUN ${install}`] : []),
    'COPY . .',
    `ENV PORT=${NODE_PORT}`,
    `EXPOSE ${NODE_PORT}`,
    `CMD ["/bin/sh", "-c", ${q(start)}]`,
  ];
  return {
    builder: 'node',
    startCommand: start,
    internalPort: NODE_PORT,
    dockerfile: lines.join('\n') + '\n',
    notes,
  };
}

function python(files: Map<string, string>, names: Set<string>, images: Images): Detection {
  const notes: string[] = [];
  const install: string[] = [];
  if (files.has('requirements.txt')) {
    install.push('COPY requirements.txt ./', 'RUN pip install --no-cache-dir -r requirements.txt');
    notes.push('requirements.txt: dependencies installed with pip.');
  }
  const pyproject = files.get('pyproject.toml');
  let start: string;
  if (names.has('manage.py')) start = `python manage.py runserver 0.0.0.0:${PYTHON_PORT}`;
  else if (names.has('app.py')) start = 'python app.py';
  else if (names.has('main.py')) start = 'python main.py';
  else {
    const script = pyproject && /\[project\.scripts\]\s*\n\s*([A-Za-z0-9_-]+)\s*=/.exec(pyproject);
    start = script ? script[1]! : 'python -m app';
  }
  const lines = [
    `FROM ${images.python}`,
    'WORKDIR /app',
    'ENV PYTHONUNBUFFERED=1',
    ...install,
    'COPY . .',
    ...(pyproject && !files.has('requirements.txt') ? ['RUN pip install --no-cache-dir .'] : []),
    `ENV PORT=${PYTHON_PORT}`,
    `EXPOSE ${PYTHON_PORT}`,
    `CMD ["/bin/sh", "-c", ${q(start)}]`,
  ];
  if (pyproject && !files.has('requirements.txt'))
    notes.push('pyproject.toml: installed with pip install .');
  notes.push(`Runs: ${start}`);
  return {
    builder: 'python',
    startCommand: start,
    internalPort: PYTHON_PORT,
    dockerfile: lines.join('\n') + '\n',
    notes,
  };
}

function go(files: Map<string, string>, names: Set<string>, images: Images): Detection {
  const module = /^module\s+(\S+)/m.exec(files.get('go.mod') ?? '')?.[1];
  const lines = [
    `FROM ${images.go} AS build`,
    'WORKDIR /src',
    ...(names.has('go.sum') ? ['COPY go.mod go.sum ./', 'RUN go mod download'] : []),
    'COPY . .',
    'RUN CGO_ENABLED=0 go build -o /out/app .',
    `FROM ${images.goRuntime}`,
    'COPY --from=build /out/app /app',
    `ENV PORT=${GO_PORT}`,
    `EXPOSE ${GO_PORT}`,
    'CMD ["/app"]',
  ];
  return {
    builder: 'go',
    startCommand: '/app',
    internalPort: GO_PORT,
    dockerfile: lines.join('\n') + '\n',
    notes: [`Go module ${module ?? '(unnamed)'}: built statically, run from ${images.goRuntime}.`],
  };
}

function staticSite(images: Images): Detection {
  const start = `httpd -f -p ${STATIC_PORT} -h /srv`;
  const lines = [
    `FROM ${images.static}`,
    'COPY . /srv',
    `EXPOSE ${STATIC_PORT}`,
    `CMD ${JSON.stringify(start.split(' '))}`,
  ];
  return {
    builder: 'static',
    startCommand: start,
    internalPort: STATIC_PORT,
    dockerfile: lines.join('\n') + '\n',
    notes: ['index.html at the top: served as a static site by busybox httpd.'],
  };
}

/** What the archive at `file` is; `dockerfile` names the tree's own Dockerfile. */
export async function detectArchive(
  file: string,
  images: Images,
  dockerfile = 'Dockerfile',
): Promise<Detection> {
  const { names, files } = await readTopLevel(file, WANTED);
  const top = dockerfile.split('/')[0]!;
  if (names.has(top)) {
    return { builder: 'dockerfile', notes: [`The tree has ${dockerfile}: it is built as it is.`] };
  }
  if (files.has('go.mod')) return go(files, names, images);
  if (files.has('package.json')) return node(files, names, images);
  if (files.has('requirements.txt') || files.has('pyproject.toml'))
    return python(files, names, images);
  if (files.has('index.html')) return staticSite(images);
  throw new ApiError(
    'bad-request',
    'pier cannot tell how to build this tree: add a Dockerfile (or package.json, requirements.txt, pyproject.toml, go.mod, index.html).',
    { issues: [{ path: 'source', message: 'nothing to build from' }] },
  );
}

export async function detect(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  sourceId: string,
): Promise<Detection> {
  const app = await findApp(ctx.db, orgId, appName);
  const source = await findSource(ctx.db, app.id, sourceId);
  return detectArchive(sourceFile(ctx, source.id), ctx.config.detectImages);
}
