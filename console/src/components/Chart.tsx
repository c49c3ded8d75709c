import { useEffect, useRef } from 'react';
import { Chart as ChartJs, registerables, type ChartConfiguration } from 'chart.js';

ChartJs.register(...registerables);

/** A Chart.js chart; `label` names it for screen readers, and `summary` says what it shows in words. */
export function Chart({ config, label, summary }: { config: ChartConfiguration; label: string; summary?: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const chart = new ChartJs(canvas.current, { ...config, options: { animation: false, responsive: true, maintainAspectRatio: false, ...config.options } });
    return () => chart.destroy();
  }, [config]);
  return (
    <figure className="chart">
      <div className="chart-box"><canvas ref={canvas} role="img" aria-label={label} /></div>
      {summary && <figcaption>{summary}</figcaption>}
    </figure>
  );
}
