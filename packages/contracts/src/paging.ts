import { z } from 'zod';

/**
 * A page cursor as the server hands it out in `nextCursor` and takes it back: opaque to the
 * caller, bounded so a forged one costs nothing to refuse. Optional where a list starts at its
 * first page.
 */
export const cursorSchema = z.string().min(1).max(200);

/** Rows per page of a screen's list: up to 100, 25 by default. */
export const pageLimitSchema = z.number().int().min(1).max(100).default(25);

/** A page of a screen's list: the cursor from the previous page (none for the first) and its size. */
export const pageInputSchema = z.strictObject({ cursor: cursorSchema.optional(), limit: pageLimitSchema });
