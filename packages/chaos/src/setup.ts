/**
 * What a chaos run sets up before any fault: its own database, the chain, and the tenants with
 * their hot wallets, risk policies, API keys, client accounts, opening balances and deposit
 * addresses.
 */
import { randomBytes } from 'node:crypto';
import {
  ALL_API_KEY_SCOPES,
  createApiKey,
  createStaffUser,
  createTenant,
  createWebhookEndpoint,
  creditAsOperator,
  openDatabase,
  provisionHotWallet,
  setRiskPolicyAsOperator,
  setTenantGovernance,
  staffActor,
  withDatabase,
  withTenant,
} from '@idem/core';
import { anvilDevPrivateKeys } from '@idem/rails';
import { rpc } from '@idem/testing/chain';
import { type initSoftHsmToken, tokenKey } from '@idem/testing/signer';
import { bech32 } from 'bech32';
import postgres from 'postgres';
import { type createPublicClient, getAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { TenantInfo } from './invariants.ts';
import type { Prng } from './prng.ts';

export const CHAIN_ID = 31337;
export const ETH_CONFIRMATIONS = 2;
export const TENANTS = 2;
/** Each client account's opening balances, in minor units. */
export const OPENING_ETH = 50_000_000_000_000_000_000n;
export const OPENING_BTC = 1_000_000_000n;

/** What the run undoes at its end, in reverse order, whatever happened. */
export type Cleanups = (() => Promise<unknown>)[];

export type SoftHsmToken = ReturnType<typeof initSoftHsmToken>;

export interface DepositAddress {
  tenantIndex: number;
  address: string;
  accountRef: string;
}

/** The tenants and accounts the integrators and depositors act for. */
export interface RunWorld {
  tenants: TenantInfo[];
  /** The tenant whose custodian account takes BTC withdrawals and deposits. */
  custodianTenant: TenantInfo;
  apiKeys: string[];
  accounts: string[];
  depositAddresses: DepositAddress[];
  /** The custodian tenant's accounts' bitcoin deposit addresses (at the custodian), one each. */
  custodianDepositAddresses: { accountRef: string; address: string }[];
  endpoint: { endpointId: string; secret: string };
  /**
   * Two admins of each tenant (by index; actor strings), for the freeze fault: one proposes its
   * lift, the other approves it. Nobody signs in as them.
   */
  tenantAdmins: [string, string][];
}

/** Creates the run's own database on the server and registers its drop; answers its URL. */
export async function createRunDatabase(
  serverUrl: string,
  seed: number,
  cleanups: Cleanups,
): Promise<{ databaseName: string; databaseUrl: string }> {
  const databaseName = `idem_chaos_${seed}_${randomBytes(3).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${databaseName}"`);
  await admin.end();
  cleanups.push(async () => {
    const dropper = postgres(serverUrl, { max: 1, onnotice: () => {} });
    try {
      await dropper.unsafe(`drop database if exists "${databaseName}" with (force)`);
    } finally {
      await dropper.end();
    }
  });
  return { databaseName, databaseUrl: withDatabase(serverUrl, databaseName) };
}

/**
 * Tenants, wallets, accounts and the custodian's webhook endpoint, set up once before any fault,
 * as the database owner. With a SoftHSM2 token, each hot wallet's key is generated in it.
 */
export async function setUpWorld(input: {
  databaseUrl: string;
  anvilRpcUrl: string;
  chain: ReturnType<typeof createPublicClient>;
  clients: number;
  prng: Prng;
  token: SoftHsmToken | null;
}): Promise<RunWorld> {
  const setupDb = await openDatabase({ url: input.databaseUrl, maxConnections: 2 });
  await setupDb.migrate();
  const tenants: TenantInfo[] = [];
  const apiKeys: string[] = [];
  const tenantAdmins: [string, string][] = [];
  for (let index = 0; index < TENANTS; index += 1) {
    const { tenant, apiKey } = await setUpTenant(setupDb.db, index, input);
    tenants.push(tenant);
    apiKeys.push(apiKey);
    tenantAdmins.push(await twoAdmins(setupDb.db, tenant.tenantId));
  }
  const custodianTenant = tenants[0] as TenantInfo;
  const endpoint = await createWebhookEndpoint(setupDb.db, custodianTenant.tenantId, {
    source: 'custodian',
  });
  const accounts: string[] = [];
  const depositAddresses: DepositAddress[] = [];
  const custodianDepositAddresses: RunWorld['custodianDepositAddresses'] = [];
  for (let c = 0; c < input.clients; c += 1) {
    const tenant = tenants[c % TENANTS] as TenantInfo;
    const accountRef = `acct-c${c}`;
    accounts.push(accountRef);
    await fundOpeningBalances(setupDb.db, tenant.tenantId, accountRef);
    const address = getAddress(`0x${input.prng.hex(20)}`);
    depositAddresses.push({ tenantIndex: tenant.index, address, accountRef });
    if (tenant === custodianTenant) {
      // A native segwit address: version 0 and a 20-byte program, bech32-encoded.
      const program = bech32.toWords(Buffer.from(input.prng.hex(20), 'hex'));
      custodianDepositAddresses.push({ accountRef, address: bech32.encode('bc', [0, ...program]) });
    }
  }
  // Each hot wallet holds exactly what its tenant's ledger has in custody (anvil's development
  // accounts start with 10,000 ETH of nobody's money), so the balance-level comparison of
  // invariant 4 can hold to the wei.
  for (const tenant of tenants) {
    const clientsOfTenant = accounts.filter((_, c) => c % TENANTS === tenant.index).length;
    await rpc(input.anvilRpcUrl, 'anvil_setBalance', [
      tenant.hotWallet,
      `0x${(OPENING_ETH * BigInt(clientsOfTenant)).toString(16)}`,
    ]);
  }
  await setupDb.close();
  return {
    tenants,
    custodianTenant,
    apiKeys,
    accounts,
    depositAddresses,
    custodianDepositAddresses,
    endpoint,
    tenantAdmins,
  };
}

/**
 * Two admins, and no delay before an approved loosening applies: a freeze's lift, approved during
 * the fault phase, applies at the governance step's next pass instead of a day later.
 */
async function twoAdmins(db: SetupDatabase, tenantId: string): Promise<[string, string]> {
  const admins: string[] = [];
  for (const who of ['alice', 'bob'])
    admins.push(
      staffActor(
        (
          await withTenant(db, tenantId, (tx) =>
            createStaffUser(tx, {
              tenantId,
              email: `${who}@chaos.test`,
              role: 'admin',
              // A hash no password verifies: the run acts as them through core, never signs in.
              passwordHash: 'chaos-member-without-password',
            }),
          )
        ).userId,
      ),
    );
  await setTenantGovernance(db, { tenantId, looseningDelaySeconds: 0 });
  return admins as [string, string];
}

type SetupDatabase = Awaited<ReturnType<typeof openDatabase>>['db'];

async function setUpTenant(
  db: SetupDatabase,
  index: number,
  input: { anvilRpcUrl: string; chain: ReturnType<typeof createPublicClient>; token: SoftHsmToken | null },
): Promise<{ tenant: TenantInfo; apiKey: string }> {
  const { token } = input;
  const { tenantId } = await createTenant(db, {
    name: `Chaos Exchange ${index}`,
    assets: [
      { code: 'BTC', network: 'bitcoin', decimals: 8, confirmations: 3 },
      { code: 'ETH', network: 'ethereum', decimals: 18, confirmations: ETH_CONFIRMATIONS },
    ],
  });
  const key = token
    ? await tokenKey(token, `chaos-hot-wallet-${index}`)
    : {
        address: privateKeyToAccount(anvilDevPrivateKeys[index + 1] as Hex).address,
        keyRef: `dev:${index + 1}`,
      };
  const hotWallet = key.address;
  if (token) await rpc(input.anvilRpcUrl, 'anvil_setBalance', [hotWallet, `0x${(10n ** 22n).toString(16)}`]);
  // Register with the chain's current nonce: the ledger allocates nonces from here on.
  const nextNonce = await input.chain.getTransactionCount({ address: hotWallet, blockTag: 'pending' });
  await provisionHotWallet(db, {
    tenantId,
    network: 'ethereum',
    address: hotWallet,
    keyRef: key.keyRef,
    nextNonce,
  });
  // As the deployment's own tools (the tables' owner): the application's role may not set rules
  // this loose. Review would need staff approvals nobody gives here: everything in range is
  // auto-approved.
  for (const assetCode of ['ETH', 'BTC'])
    await setRiskPolicyAsOperator(db, {
      tenantId,
      assetCode,
      autoApproveMaxMinor: '1000000000000000000000000',
      fourEyesMinMinor: '10000000000000000000000000',
      velocityMaxPerHour: 1_000_000,
      similarWindowMinutes: 1,
      actor: 'chaos',
    });
  const { apiKey } = await createApiKey(db, tenantId, {
    label: 'chaos',
    scopes: ALL_API_KEY_SCOPES,
    createdBy: 'chaos',
  });
  return { tenant: { index, tenantId, hotWallet, ethConfirmations: ETH_CONFIRMATIONS }, apiKey };
}

async function fundOpeningBalances(db: SetupDatabase, tenantId: string, accountRef: string): Promise<void> {
  // As the deployment's own tools: the opening balances have no chain evidence or proposal.
  for (const [asset, amount] of [
    ['ETH', OPENING_ETH.toString()],
    ['BTC', OPENING_BTC.toString()],
  ] as const)
    await creditAsOperator(db, {
      tenantId,
      deposit: {
        reference: `opening-${asset}-${accountRef}`,
        accountId: accountRef,
        asset,
        amountMinor: amount,
      },
      idempotencyKey: `opening-${asset}-${accountRef}`,
      actor: 'chaos-setup',
    });
}

/** One JSON-RPC call straight to anvil (its own methods: balances, reorgs, the pool, fees). */
export { rpc };
