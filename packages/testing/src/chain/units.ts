/** One ether in wei, as a bigint: amounts in tests are minor units too. */
export const ETH = 10n ** 18n;
/** One gwei in wei: fee caps and gas prices in tests. */
export const GWEI = 10n ** 9n;
