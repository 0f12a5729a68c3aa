import { z } from 'zod';

// zod probes for eval (new Function) to compile faster parsers; our CSP forbids eval, so the probe
// is a CSP violation report on every page. Parse without it.
z.config({ jitless: true });
