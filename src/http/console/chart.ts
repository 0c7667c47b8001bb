import { html } from "hono/html";
import type { JobActivityMinute } from "../../jobs/admin/job-activity.ts";
import type { Html } from "./layout.ts";

const WIDTH = 600;
const HEIGHT = 160;
const LEFT = 34;
const BOTTOM = 18;
const TOP = 6;

/** A step of 1, 2 or 5 × 10ⁿ that splits `max` into at most four parts. */
function niceMax(max: number): number {
  if (max <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(max / 4));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s * 4 >= max) ?? magnitude * 10;
  return step * 4;
}

/**
 * Jobs per minute as stacked bars (succeeded below, failed above), drawn on the server as SVG: no
 * script and no chart library to ship, readable without JavaScript; the numbers are also in a
 * table for screen readers (the SVG is `aria-hidden`, the table follows it).
 */
export function activityChart(minutes: JobActivityMinute[]): Html {
  const max = niceMax(Math.max(0, ...minutes.map((m) => m.succeeded + m.failed)));
  const plotW = WIDTH - LEFT - 4;
  const plotH = HEIGHT - BOTTOM - TOP;
  const slot = plotW / Math.max(1, minutes.length);
  const barW = Math.max(1, slot * 0.8);
  const y = (n: number) => TOP + plotH - (n / max) * plotH;
  const bars = minutes.map((m, i) => {
    const x = (LEFT + i * slot + (slot - barW) / 2).toFixed(1);
    const okTop = y(m.succeeded);
    const badTop = y(m.succeeded + m.failed);
    return html`${
      m.succeeded > 0
        ? html`<rect class="bar-ok" x="${x}" y="${okTop.toFixed(1)}" width="${barW.toFixed(1)}" height="${(TOP + plotH - okTop).toFixed(1)}"></rect>`
        : ""
    }${
      m.failed > 0
        ? html`<rect class="bar-bad" x="${x}" y="${badTop.toFixed(1)}" width="${barW.toFixed(1)}" height="${(okTop - badTop).toFixed(1)}"></rect>`
        : ""
    }`;
  });
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const value = Math.round(max * f);
    const ty = y(value);
    return html`<line class="axis" x1="${LEFT}" x2="${WIDTH - 4}" y1="${ty.toFixed(1)}" y2="${ty.toFixed(1)}"></line><text x="${LEFT - 4}" y="${(ty + 3).toFixed(1)}" text-anchor="end">${value}</text>`;
  });
  const label = (i: number) => {
    const m = minutes[i];
    return m ? m.at.slice(11, 16) : "";
  };
  const last = minutes.length - 1;
  const totals = minutes.reduce(
    (t, m) => ({ succeeded: t.succeeded + m.succeeded, failed: t.failed + m.failed }),
    { succeeded: 0, failed: 0 },
  );
  return html`<figure class="chart">
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-caption" preserveAspectRatio="xMidYMid meet">
${ticks}${bars}
<text x="${LEFT}" y="${HEIGHT - 4}">${label(0)}</text>
<text x="${(LEFT + plotW / 2).toFixed(0)}" y="${HEIGHT - 4}" text-anchor="middle">${label(Math.floor(last / 2))}</text>
<text x="${WIDTH - 4}" y="${HEIGHT - 4}" text-anchor="end">${label(last)} UTC</text>
</svg>
<figcaption id="chart-caption"><span class="legend"><span class="key-ok">succeeded: ${totals.succeeded}</span><span class="key-bad">failed: ${totals.failed}</span></span>
<span class="muted">jobs per minute, last ${minutes.length} minutes</span></figcaption>
</figure>`;
}
