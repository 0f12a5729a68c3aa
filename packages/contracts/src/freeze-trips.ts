import { z } from 'zod';
import { assetCodeSchema } from './asset-code.ts';

/**
 * Automatic trips of the freeze switch (docs/GOVERNANCE.md "Freeze", "Automatic trips"): the
 * tenant sets thresholds, the workers measure them, and a trip crossed freezes by itself exactly
 * like a member would (actor `system:trip:<name>`); its lift is a `freeze_lift` control change.
 *
 * One row per tenant (assetCode null: measured over every asset) and optionally one per asset.
 * Each trip is off while its fields are null. Turning a trip on or making it stricter applies at
 * once; turning one off or loosening it is a `freeze_trip_loosen` control change.
 */
export const FREEZE_TRIP_FAILURES_WINDOW_MIN_SECONDS = 60;
export const FREEZE_TRIP_FAILURES_WINDOW_MAX_SECONDS = 7 * 86_400;

export const freezeTripSettingsSchema = z
  .strictObject({
    /** Null: the tenant-wide row (failures freeze the tenant; outflow is measured per asset). */
    assetCode: assetCodeSchema.nullable(),
    /**
     * Trips when MORE than this many withdrawals became UNKNOWN or FAILED_TERMINAL within the
     * window (0: the first one trips). Null with the window: this trip is off.
     */
    failuresMax: z.number().int().min(0).max(100_000).nullable(),
    failuresWindowSeconds: z
      .number()
      .int()
      .min(FREEZE_TRIP_FAILURES_WINDOW_MIN_SECONDS)
      .max(FREEZE_TRIP_FAILURES_WINDOW_MAX_SECONDS)
      .nullable(),
    /**
     * Trips when an asset's withdrawals sent in the last hour exceed this share (percent) of its
     * hot wallet balance as known (docs/GOVERNANCE.md). Null: off.
     */
    outflowShareMaxPercent: z.number().int().min(1).max(100).nullable(),
  })
  .refine((s) => (s.failuresMax === null) === (s.failuresWindowSeconds === null), {
    error: 'the failures trip needs both a count and a window, or neither',
  });
export type FreezeTripSettings = z.infer<typeof freezeTripSettingsSchema>;

export const freezeTripViewSchema = z.object({
  assetCode: z.string().nullable(),
  failuresMax: z.number().int().nullable(),
  failuresWindowSeconds: z.number().int().nullable(),
  outflowShareMaxPercent: z.number().int().nullable(),
  updatedBy: z.string(),
  updatedAt: z.string(),
  /** An open or approved `freeze_trip_loosen` proposal for this row, waiting. */
  pendingLoosenProposalId: z.uuid().nullable(),
});
export type FreezeTripView = z.infer<typeof freezeTripViewSchema>;

export const freezeTripsViewSchema = z.object({ trips: z.array(freezeTripViewSchema) });
export type FreezeTripsView = z.infer<typeof freezeTripsViewSchema>;

/** What one trip check measured and whether it froze (the workers log it). */
export const freezeTripFiringSchema = z.object({
  trip: z.string(),
  scope: z.enum(['tenant', 'asset']),
  assetCode: z.string().nullable(),
  freezeId: z.uuid(),
  reason: z.string(),
});
export type FreezeTripFiring = z.infer<typeof freezeTripFiringSchema>;
