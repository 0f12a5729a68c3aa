import { z } from 'zod';

/**
 * An asset's code as tenants configure it and integrators send it (ETH, USDC): 2 to 12 upper-case
 * letters and digits. The one definition every request, webhook and rail schema uses.
 */
export const assetCodeSchema = z
  .string()
  .regex(/^[A-Z0-9]{2,12}$/, { error: 'asset must be an asset code such as ETH' });
