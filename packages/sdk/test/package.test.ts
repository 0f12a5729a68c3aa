import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The package as published. Builds dist/ with the real tsup config, then installs it the way npm
 * would into a temporary directory: the publishConfig package.json and a copy of dist/ under
 * node_modules/@idem/sdk, next to links to the SDK's `dependencies` (and @types/node), and nothing
 * else of this workspace. A build that still needed @idem/contracts, viem or any other package an
 * integrator does not get fails there, as it would for them.
 */

const run = promisify(execFile);
const localRequire = createRequire(import.meta.url);
const sdkDir = fileURLToPath(new URL('..', import.meta.url));
const dist = join(sdkDir, 'dist');
const tsupBin = join(sdkDir, 'node_modules', 'tsup', 'dist', 'cli-default.js');
const tscBin = localRequire.resolve('typescript/bin/tsc');

interface LoadedSdk {
  createIdemClient: (options: { baseUrl: string; apiKey: string }) => { withdrawals: { submit: unknown } };
  IdemApiError: new (problem: Record<string, unknown>) => Error & { isIdempotencyConflict: boolean };
  withdrawalKey: (id: unknown) => string;
}

/** What a consumer sees of the loaded module; the same checks for require() and import(). */
function inspect(sdk: LoadedSdk) {
  let blankKey = 'accepted';
  try {
    sdk.withdrawalKey('  ');
  } catch (error) {
    blankKey = error instanceof TypeError ? 'TypeError' : 'another error';
  }
  const conflict = new sdk.IdemApiError({ code: 'IDEMPOTENCY_CONFLICT', status: 409, detail: 'x' });
  return {
    createIdemClient: typeof sdk.createIdemClient,
    submit: typeof sdk.createIdemClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k' }).withdrawals.submit,
    IdemApiError: conflict instanceof Error && conflict.isIdempotencyConflict,
    key: sdk.withdrawalKey('42'),
    blankKey,
  };
}

const expected = {
  createIdemClient: 'function',
  submit: 'function',
  IdemApiError: true,
  key: 'withdrawal-42',
  blankKey: 'TypeError',
};

let consumerDir = '';

beforeAll(async () => {
  await run(process.execPath, [tsupBin], { cwd: sdkDir });

  consumerDir = await mkdtemp(join(tmpdir(), 'idem-sdk-consumer-'));
  const manifest = JSON.parse(await readFile(join(sdkDir, 'package.json'), 'utf8')) as {
    name: string;
    type: string;
    dependencies: Record<string, string>;
    publishConfig: Record<string, unknown>;
  };
  const modules = join(consumerDir, 'node_modules');
  const installed = join(modules, ...manifest.name.split('/'));
  await cp(dist, join(installed, 'dist'), { recursive: true });
  const published = { name: manifest.name, type: manifest.type, ...manifest.publishConfig };
  await writeFile(join(installed, 'package.json'), JSON.stringify(published));
  for (const dependency of [...Object.keys(manifest.dependencies), '@types/node']) {
    await mkdir(dirname(join(modules, dependency)), { recursive: true });
    await symlink(await realpath(join(sdkDir, 'node_modules', dependency)), join(modules, dependency), 'dir');
  }
}, 60_000);

afterAll(async () => {
  if (consumerDir) await rm(consumerDir, { recursive: true, force: true });
});

describe('the published package', () => {
  it('require() gets dist/index.cjs, with the client, the errors and withdrawalKey', () => {
    const consumerRequire = createRequire(join(consumerDir, 'consumer.cjs'));
    expect(consumerRequire.resolve('@idem/sdk')).toMatch(/[\\/]@idem[\\/]sdk[\\/]dist[\\/]index\.cjs$/);
    expect(inspect(consumerRequire('@idem/sdk') as LoadedSdk)).toEqual(expected);
  });

  it('import() in plain Node gets dist/index.js, with the same exports', async () => {
    // A child Node, not vitest's module runner: Node's own ESM loader and resolution.
    const script = `
      const sdk = await import('@idem/sdk');
      const inspect = ${inspect.toString()};
      console.log(JSON.stringify({ resolved: import.meta.resolve('@idem/sdk'), ...inspect(sdk) }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: consumerDir,
    });
    const { resolved, ...seen } = JSON.parse(stdout) as { resolved: string };
    expect(resolved).toMatch(/\/@idem\/sdk\/dist\/index\.js$/);
    expect(seen).toEqual(expected);
  });

  it('has declarations that import nothing from @idem/*', async () => {
    for (const file of ['index.d.ts', 'index.d.cts']) {
      const declarations = await readFile(join(dist, file), 'utf8');
      expect(declarations, file).toContain('declare function createIdemClient');
      expect(declarations, file).not.toContain('@idem/');
    }
  });

  it('is one file per format, without viem or the address validators', async () => {
    expect((await readdir(dist)).sort()).toEqual([
      'index.cjs',
      'index.cjs.map',
      'index.d.cts',
      'index.d.ts',
      'index.js',
      'index.js.map',
    ]);
    for (const map of ['index.js.map', 'index.cjs.map']) {
      const { sources } = JSON.parse(await readFile(join(dist, map), 'utf8')) as { sources: string[] };
      const addressCode = /[\\/](viem|ox|@noble|bitcoin-address-validation|bech32)[\\/]/;
      expect(
        sources.filter((source) => addressCode.test(source)),
        map,
      ).toEqual([]);
      // What the SDK does need of the contracts, the schemas, is inlined.
      expect(
        sources.some((source) => source.endsWith('contracts/src/api.ts')),
        map,
      ).toBe(true);
    }
  });

  it('gives strict TypeScript consumers, ESM and CommonJS, real types and not any', async () => {
    // Every line marked `// error TSxxxx` must be reported with that code, and nothing else at all:
    // not the correct usage, not the declarations themselves (skipLibCheck is off).
    const consumer = `\
import {
  createIdemClient,
  IdemApiError,
  type ErrorCode,
  type OperationState,
  type OperationView,
  type WithdrawalRequest,
  withdrawalKey,
} from '@idem/sdk';

const idem = createIdemClient({ baseUrl: 'https://idem.example.com', apiKey: 'key', retry: { attemptsMax: 3 } });
const request: WithdrawalRequest = {
  withdrawalId: '42',
  accountId: 'cust-7',
  asset: 'ETH',
  network: 'ethereum',
  destination: '0x52908400098527886E0F7030069857D2E4169EE7',
  amountMinor: '1000',
};

export async function submit(): Promise<OperationView> {
  const { outcome, withdrawal } = await idem.withdrawals.submit(request, withdrawalKey(42));
  const state: OperationState = withdrawal.state;
  const page = await idem.withdrawals.list({ state, limit: 10 });
  return outcome === 'REPLAYED' ? withdrawal : (page.items[0] ?? withdrawal);
}

export function holder(error: unknown): string | undefined {
  if (!(error instanceof IdemApiError)) return undefined;
  const code: ErrorCode = error.code;
  return error.isIdempotencyConflict ? error.problem.holderKey : \`\${code} \${error.problem.requestId}\`;
}

export async function wrong(error: IdemApiError): Promise<unknown[]> {
  return [
    await idem.withdrawals.submit({ ...request, amountMinor: 1000 }, withdrawalKey('43')), // error TS2322
    error.code === 'NO_SUCH_CODE', // error TS2367
    (await idem.withdrawals.get('42')).stateName, // error TS2339
    withdrawalKey({ id: 42 }), // error TS2345
    createIdemClient({ baseUrl: 'https://idem.example.com' }), // error TS2345
  ];
}
`;
    // Under node16 resolution an .mts file takes the package's `import` condition and a .cts file its
    // `require` condition (and a CommonJS file may not import ESM-only types).
    const files = ['esm.mts', 'cjs.cts'];
    for (const name of files) await writeFile(join(consumerDir, name), consumer);
    await writeFile(
      join(consumerDir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          target: 'ES2022',
          // No DOM: a Node project's own settings; the SDK's types need only @types/node.
          lib: ['ES2023'],
          module: 'Node16',
          moduleResolution: 'Node16',
          types: ['node'],
        },
        files,
      }),
    );

    const marked = consumer.split('\n').flatMap((line, index) => {
      const code = /\/\/ error (TS\d+)$/.exec(line)?.[1];
      return code ? [`(${index + 1}): ${code}`] : [];
    });
    const wanted = files.flatMap((name) => marked.map((error) => `${name}${error}`)).sort();
    const output = await run(process.execPath, [
      tscBin,
      '-p',
      consumerDir,
      '--pretty',
      'false',
      '--listFiles',
    ]).then(
      ({ stdout }) => stdout,
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`,
    );
    const lines = output.split('\n');
    const reported = lines
      .filter((line) => /error TS\d+/.test(line))
      .map((line) => {
        const match = /(?:^|[\\/])([^\\/]+)\((\d+),\d+\): error (TS\d+)/.exec(line);
        return match && files.includes(match[1] ?? '') ? `${match[1]}(${match[2]}): ${match[3]}` : line;
      })
      .sort();
    expect(marked).toHaveLength(5);
    expect(reported, output).toEqual(wanted);
    // Each consumer was checked against its own declaration file, the installed copy.
    const declarations = lines.filter((line) => /[\\/]@idem[\\/]sdk[\\/]dist[\\/]index\.d\.c?ts$/.test(line));
    expect(declarations.map((line) => line.replace(/^.*[\\/]/, '')).sort(), output).toEqual([
      'index.d.cts',
      'index.d.ts',
    ]);
  }, 120_000);
});
