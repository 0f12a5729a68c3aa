import { z } from 'zod';

/**
 * A page cursor as the server hands it out in `nextCursor` and takes it back: opaque to the
 * caller, bounded so a forged one costs nothing to refuse. Optional where a list starts at its
 * first page.
 */
export const cursorSchema = z.string().min(1).max(200);
