import type { ChaosReport } from './run.ts';
import type { TimelineSample } from './timeline.ts';

/** The human report: what was done, what it did to the system, and what the invariants found. */
export function formatText(report: ChaosReport): string {
  const lines: string[] = [];
  const verdict = report.ok ? 'PASS' : 'FAIL';
  lines.push(
    `chaos ${verdict}  seed ${report.seed}  (${(report.wallClockMs / 1000).toFixed(0)} s wall clock)`,
  );
  lines.push(`replay: ${report.command}`);
  if (!report.ok) lines.push(`FIRST VIOLATION (seed ${report.seed}): ${report.firstViolation}`);
  if (report.failover) {
    const f = report.failover;
    lines.push(
      '',
      `failover (${f.scenario} at t+${(f.atMs / 1000).toFixed(1)}s): ${f.formerPrimary} -> ${f.promoted ?? 'nobody'} in ${f.promotedAfterMs ?? '?'} ms; write-unavailability ${f.writeUnavailableMs ?? '?'} ms; ${f.clientRetries} client retries; ${f.unknownRetried} given-up submissions retried with the same key, ${f.unknownResolved} resolved, ${f.unknownNotOne.length} not exactly one operation; probe ${f.probe.acknowledged} acknowledged, ${f.probe.lost} lost`,
    );
    if (f.error) lines.push(`  failover error: ${f.error}`);
  }
  lines.push('', 'invariants:');
  for (const check of report.checks) {
    const mark = check.status === 'pass' ? 'ok  ' : check.status === 'fail' ? 'FAIL' : 'n/a ';
    lines.push(`  ${mark} ${check.id.padEnd(8)} ${check.title}`);
    lines.push(`       ${check.detail}`);
    for (const violation of check.violations) lines.push(`       - ${violation}`);
  }
  lines.push(
    '',
    `parts landed: ${Object.entries(report.landed)
      .map(([k, v]) => `${k}=${v ? 'yes' : 'no'}`)
      .join(', ')}`,
  );
  lines.push('', 'faults injected:');
  for (const [name, n] of Object.entries(report.faultsInjected).sort())
    lines.push(`  ${String(n).padStart(5)}  ${name}`);
  for (const [name, n] of Object.entries(report.deposits.faults).sort())
    lines.push(`  ${String(n).padStart(5)}  deposit ${name}`);
  if (report.faultErrors.length > 0) {
    lines.push('', 'fault errors (a fault that could not be applied):');
    for (const error of report.faultErrors.slice(0, 20)) lines.push(`  - ${error}`);
  }
  if (report.unplannedExits.length > 0) {
    lines.push(
      '',
      `UNPLANNED PROCESS EXITS (${report.unplannedExits.length}; restarted like a supervisor would):`,
    );
    for (const exit of report.unplannedExits.slice(0, 20)) lines.push(`  - ${exit}`);
  }
  lines.push(
    '',
    `process starts: ${Object.entries(report.processStarts)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
  lines.push(
    `integrators: ${Object.entries(report.integrators)
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
  lines.push(
    `deposits: chain sent=${report.deposits.chainSent} (send errors ${report.deposits.chainSendErrors}), custodian webhooks sent=${report.deposits.webhooksSent} acknowledged=${report.deposits.webhooksAcknowledged}`,
  );
  lines.push(
    `withdrawals by final state: ${Object.entries(report.finalStates)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
  lines.push(
    `throughput during faults: ${report.throughput.createdPerSecondDuringFaults} created/s, ${report.throughput.finalizedPerSecondDuringFaults} settled/s, ${report.throughput.submitCallsDuringFaults} submit calls`,
  );
  lines.push(
    report.convergedAfterMs === null
      ? `quiet phase: did NOT converge within ${report.options.quietMsMax} ms (${report.notConverged})`
      : `quiet phase: converged after ${report.convergedAfterMs} ms`,
  );
  lines.push('', `fault schedule (${report.schedule.length} events):`);
  for (const event of report.schedule) lines.push(`  ${event}`);
  lines.push('', `process logs: ${report.outDir}`);
  return lines.join('\n');
}

/** One line a machine can grep for: the whole report minus the timeline. */
export function formatJsonLine(report: ChaosReport): string {
  const { timeline: _timeline, ...rest } = report;
  return `CHAOS_JSON ${JSON.stringify(rest)}`;
}

const STATE_COLOURS: Record<string, string> = {
  REQUESTED: '#9e9e9e',
  APPROVED: '#bdbdbd',
  SIGNING: '#ffb300',
  SIGNED: '#fb8c00',
  BROADCAST: '#1e88e5',
  UNKNOWN: '#e53935',
  CONFIRMED: '#43a047',
  REJECTED: '#6d4c41',
  VERIFIED_NOT_SENT: '#8e24aa',
  FAILED_TERMINAL: '#000000',
};

/** A self-contained page: the verdict, a stacked timeline of withdrawals by state (inline SVG), the checks. */
export function formatHtml(report: ChaosReport): string {
  const esc = (text: string) =>
    text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
  const checks = report.checks
    .map(
      (c) =>
        `<tr class="${c.status}"><td>${c.id}</td><td>${c.status}</td><td>${esc(c.title)}<br><small>${esc(c.detail)}</small>${c.violations.map((v) => `<br><small>- ${esc(v)}</small>`).join('')}</td></tr>`,
    )
    .join('');
  const faults = Object.entries(report.faultsInjected)
    .sort()
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`)
    .join('');
  return `<!doctype html><html><head><meta charset="utf-8"><title>Idem chaos seed ${report.seed}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}td{padding:2px 8px;vertical-align:top}
.fail td{background:#fdd}.pass td:nth-child(2){color:#2e7d32}.not-checkable td:nth-child(2){color:#888}</style></head><body>
<h1>Idem chaos: ${report.ok ? 'PASS' : 'FAIL'} (seed ${report.seed})</h1>
<p><code>${esc(report.command)}</code></p>
${report.firstViolation ? `<p><b>First violation:</b> ${esc(report.firstViolation)}</p>` : ''}
<h2>Withdrawals by state over time</h2>
${timelineSvg(report.timeline, report.options.durationMs)}
<h2>Invariants</h2><table>${checks}</table>
<h2>Faults injected</h2><table>${faults}</table>
<h2>Schedule</h2><pre>${esc(report.schedule.join('\n'))}</pre>
</body></html>
`;
}

function timelineSvg(timeline: TimelineSample[], faultPhaseMs: number): string {
  const width = 1000;
  const height = 320;
  const pad = 40;
  if (timeline.length < 2) return '<p>(no samples)</p>';
  const states = Object.keys(STATE_COLOURS).filter((s) => timeline.some((t) => (t.states[s] ?? 0) > 0));
  const tMax = Math.max(...timeline.map((t) => t.tMs));
  const yMax = Math.max(1, ...timeline.map((t) => Object.values(t.states).reduce((a, b) => a + b, 0)));
  const x = (tMs: number) => pad + ((width - 2 * pad) * tMs) / tMax;
  const y = (n: number) => height - pad - ((height - 2 * pad) * n) / yMax;
  // Stacked areas, bottom to top in the order above.
  const below = timeline.map(() => 0);
  const areas = states.map((state) => {
    const top = timeline.map((t, i) => (below[i] ?? 0) + (t.states[state] ?? 0));
    const upper = timeline.map((t, i) => `${x(t.tMs).toFixed(1)},${y(top[i] ?? 0).toFixed(1)}`);
    const lower = timeline.map((t, i) => `${x(t.tMs).toFixed(1)},${y(below[i] ?? 0).toFixed(1)}`).reverse();
    top.forEach((value, i) => {
      below[i] = value;
    });
    return `<polygon points="${[...upper, ...lower].join(' ')}" fill="${STATE_COLOURS[state]}" opacity="0.85"><title>${state}</title></polygon>`;
  });
  const legend = states
    .map(
      (s, i) =>
        `<rect x="${pad + i * 110}" y="8" width="10" height="10" fill="${STATE_COLOURS[s]}"/><text x="${pad + i * 110 + 14}" y="17" font-size="11">${s}</text>`,
    )
    .join('');
  const quietX = x(Math.min(faultPhaseMs, tMax));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">
${areas.join('\n')}
<line x1="${quietX}" y1="${pad}" x2="${quietX}" y2="${height - pad}" stroke="#000" stroke-dasharray="4 3"/>
<text x="${quietX + 4}" y="${pad + 12}" font-size="11">quiet phase</text>
<line x1="${pad}" y1="${height - pad}" x2="${width - pad}" y2="${height - pad}" stroke="#000"/>
<line x1="${pad}" y1="${pad}" x2="${pad}" y2="${height - pad}" stroke="#000"/>
<text x="${pad}" y="${height - 10}" font-size="11">0 s</text>
<text x="${width - pad - 30}" y="${height - 10}" font-size="11">${(tMax / 1000).toFixed(0)} s</text>
<text x="4" y="${pad + 4}" font-size="11">${yMax}</text>
${legend}
</svg>`;
}
