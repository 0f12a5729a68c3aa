/**
 * I18: hot-wallet keys in a PKCS#11 token (SoftHSM2, initialised here in a temporary directory),
 * signing real transactions mined by a real anvil. What it proves: the key is generated inside
 * the token and cannot be read out; the hot wallet's address is the token's public key; what the
 * token signs is mined with that address as the sender; a payload changed after approval is
 * refused before the token is asked anything (C02); a token that answers after the deadline
 * yields no signature at all.
 */
import { isIdemError } from '@idem/contracts';
import { balanceOf, rpc } from '@idem/testing/chain';
import {
  approvalFor,
  initSoftHsmToken,
  type SoftHsmToken,
  softHsmModulePath,
  tokenKey,
} from '@idem/testing/signer';
import pkcs11js from 'pkcs11js';
import {
  type Address,
  createPublicClient,
  type Hex,
  http,
  parseTransaction,
  recoverTransactionAddress,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnvilInstance, anvilDevPrivateKeys, startAnvil } from '../src/evm/anvil.ts';
import { createEvmRail } from '../src/evm/rail.ts';
import { openPkcs11Signer, pkcs11Module } from '../src/signer/pkcs11.ts';
import type { DigestSigner } from '../src/signer/signer.ts';

const chainId = 31337;
const fees = { gasLimit: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;
/** Half the secp256k1 group order: EIP-2 accepts only s at or below it. */
const halfOrder = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/** Counts the calls that reach the token through the signer interface. */
function counting(signer: DigestSigner): DigestSigner & { calls: number } {
  const counted = {
    calls: 0,
    address: signer.address,
    location: signer.location,
    signDigest: (digest: Hex) => {
      counted.calls += 1;
      return signer.signDigest(digest);
    },
  };
  return counted;
}

describe.skipIf(!softHsmModulePath())('I18 hot-wallet keys in a PKCS#11 token (SoftHSM2, real anvil)', () => {
  let token: SoftHsmToken;
  let anvil: AnvilInstance;
  let keyRef: string;
  let address: Address;

  beforeAll(async () => {
    token = initSoftHsmToken();
    anvil = await startAnvil({ chainId });
    const created = await tokenKey(token, 'hot-wallet-test');
    keyRef = created.keyRef;
    address = created.address;
    // Fund the token's address from an anvil development account.
    const funder = createEvmRail({
      rpcUrl: anvil.rpcUrl,
      chainId,
      privateKey: anvilDevPrivateKeys[5] as Hex,
    });
    const transfer = { asset: 'native' as const, to: address, amountMinor: 10n ** 18n };
    const funding = await funder.sign(
      { transfer, nonce: (await funder.readNonces()).pending, ...fees },
      approvalFor(transfer),
    );
    await funder.broadcast(funding.rawTransaction);
  });
  afterAll(async () => {
    await anvil?.stop();
    token?.dispose();
  });

  it('I18 the key reference names where the key lives and holds no key material', () => {
    expect(keyRef).toMatch(
      /^pkcs11:token=idem-test;id=(%[0-9a-f]{2})+\?module-path=.+&pin-source=env:IDEM_TEST_HSM_PIN$/,
    );
    expect(keyRef).not.toContain(token.pin);
  });

  it('I18 the private key cannot be read from the token: C_GetAttributeValue on CKA_VALUE is refused', async () => {
    const module = pkcs11Module(token.modulePath);
    const slot = module
      .C_GetSlotList(true)
      .find((s) => module.C_GetTokenInfo(s).label.trim() === token.tokenLabel);
    if (!slot) throw new Error('token not found');
    const session = module.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
    try {
      try {
        module.C_Login(session, pkcs11js.CKU_USER, token.pin);
      } catch (error) {
        if (!String(error).includes('CKR_USER_ALREADY_LOGGED_IN')) throw error;
      }
      module.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY }]);
      const keys = module.C_FindObjects(session, 10);
      module.C_FindObjectsFinal(session);
      expect(keys).toHaveLength(1);
      const key = keys[0] as Buffer;
      const flags = module.C_GetAttributeValue(session, key, [
        { type: pkcs11js.CKA_SENSITIVE },
        { type: pkcs11js.CKA_EXTRACTABLE },
      ]);
      expect(flags.map((f) => f.value[0])).toEqual([1, 0]);
      expect(() => module.C_GetAttributeValue(session, key, [{ type: pkcs11js.CKA_VALUE }])).toThrow(
        /CKR_ATTRIBUTE_SENSITIVE/,
      );
    } finally {
      module.C_CloseSession(session);
    }
  });

  it('I18 C02 a withdrawal signed by the token is mined on anvil with the token address as its sender', async () => {
    const signer = openPkcs11Signer(keyRef);
    expect(signer.address).toBe(address);
    const rail = createEvmRail({ rpcUrl: anvil.rpcUrl, chainId, signer });
    expect(rail.address).toBe(address);
    const to = freshAddress();
    const transfer = { asset: 'native' as const, to, amountMinor: 123_456_789n };
    const { pending: nonce } = await rail.readNonces();
    const signed = await rail.sign({ transfer, nonce, ...fees }, approvalFor(transfer));
    const parsed = parseTransaction(signed.rawTransaction);
    expect(BigInt(parsed.s ?? '0x0') <= halfOrder).toBe(true);
    expect(await recoverTransactionAddress({ serializedTransaction: signed.rawTransaction as never })).toBe(
      address,
    );

    expect(await rail.broadcast(signed.rawTransaction)).toMatchObject({ outcome: 'accepted' });
    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x1']);
    const chain = createPublicClient({ transport: http(anvil.rpcUrl) });
    const mined = await chain.getTransaction({ hash: signed.txHash });
    expect(mined.from.toLowerCase()).toBe(address.toLowerCase());
    expect(await balanceOf(anvil.rpcUrl, to)).toBe(123_456_789n);
  });

  it('I18 C02 a payload changed after approval is refused by the signer before the token is called', async () => {
    const signer = counting(openPkcs11Signer(keyRef));
    const rail = createEvmRail({ rpcUrl: anvil.rpcUrl, chainId, signer });
    const to = freshAddress();
    const transfer = { asset: 'native' as const, to, amountMinor: 5_000n };
    const approval = approvalFor(transfer);
    const request = { transfer, nonce: 0, ...fees };

    // The stored amount was raised after approval: its hash no longer matches.
    const tampered = { ...approval, payload: { ...approval.payload, amountMinor: '5000000' } };
    await expect(rail.sign(request, tampered)).rejects.toSatisfy((e) => isIdemError(e, 'PAYLOAD_MISMATCH'));
    // The approval is intact, but the transaction pays someone else than it names.
    const elsewhere = { ...request, transfer: { ...transfer, to: freshAddress() } };
    await expect(rail.sign(elsewhere, approval)).rejects.toSatisfy((e) => isIdemError(e, 'PAYLOAD_MISMATCH'));
    const more = { ...request, transfer: { ...transfer, amountMinor: 5_001n } };
    await expect(rail.sign(more, approval)).rejects.toSatisfy((e) => isIdemError(e, 'PAYLOAD_MISMATCH'));
    expect(signer.calls).toBe(0);

    // The same signer signs what the approval covers.
    await rail.sign(request, approval);
    expect(signer.calls).toBe(1);
  });

  it('I18 a token that answers after the deadline yields SIGNER_UNAVAILABLE, and its late signature is dropped', async () => {
    const signer = openPkcs11Signer(keyRef);
    let answered = 0;
    // The token signs, then its answer is held past the rail's deadline (a lost answer).
    const late: DigestSigner = {
      address: signer.address,
      location: signer.location,
      signDigest: async (digest) => {
        const signature = await signer.signDigest(digest);
        answered += 1;
        await new Promise((resolve) => setTimeout(resolve, 400));
        return signature;
      },
    };
    const rail = createEvmRail({ rpcUrl: anvil.rpcUrl, chainId, signer: late, signTimeoutMs: 100 });
    const transfer = { asset: 'native' as const, to: freshAddress(), amountMinor: 7n };
    await expect(rail.sign({ transfer, nonce: 0, ...fees }, approvalFor(transfer))).rejects.toSatisfy((e) =>
      isIdemError(e, 'SIGNER_UNAVAILABLE'),
    );
    expect(answered).toBe(1);
  });
});
