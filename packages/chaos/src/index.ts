export { detectLanded } from './evidence.ts';
export { Prng } from './prng.ts';
export { type ChaosProxy, startChaosProxy } from './proxy.ts';
export { formatHtml, formatJsonLine, formatText } from './report.ts';
export { type ChaosOptions, type ChaosReport, runChaos } from './run.ts';
export { buildSchedule, describeEvent, type FaultEvent } from './schedule.ts';
