export { type RunningServer, startServer } from './app.ts';
export { hashPassword } from './auth/password.ts';
export { type Env, readEnv } from './env.ts';
export { type AppRouter, appRouter } from './router.ts';
export { type Context, createCallerFactory } from './trpc.ts';
