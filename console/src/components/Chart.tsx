import { useEffect, useRef } from 'react';
import { Chart as ChartJs, registerables, type ChartConfiguration } from 'chart.js';

ChartJs.register(...registerables);

/** Distinct colours, dark enough against white, given to datasets that name none. */
const PALETTE = ['#1565c0', '#ef6c00', '#2e7d32', '#6a1b9a', '#00838f', '#ad1457', '#4e342e', '#546e7a'];

/** A Chart.js chart; `label` names it for screen readers, and `summary` says what it shows in words. */
export function Chart({ config, label, summary }: { config: ChartConfiguration; label: string; summary?: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const datasets = config.data.datasets.map((d, i) => (d.backgroundColor ? d : { ...d, backgroundColor: PALETTE[i % PALETTE.length], borderColor: PALETTE[i % PALETTE.length] }));
    const chart = new ChartJs(canvas.current, { ...config, data: { ...config.data, datasets }, options: { animation: false, responsive: true, maintainAspectRatio: false, ...config.options } } as ChartConfiguration);
    return () => chart.destroy();
  }, [config]);
  return (
    <figure className="chart">
      <div className="chart-box"><canvas ref={canvas} role="img" aria-label={label} /></div>
      {summary && <figcaption>{summary}</figcaption>}
    </figure>
  );
}
