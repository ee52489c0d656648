// ECharts setup shared by the pages: only the parts the dashboard draws.
import * as echarts from 'echarts/core';
import { BarChart, LineChart, CustomChart } from 'echarts/charts';
import { GridComponent, TooltipComponent, LegendComponent, TitleComponent, DataZoomComponent } from 'echarts/components';
import { CanvasRenderer } from 'echarts/renderers';

echarts.use([BarChart, LineChart, CustomChart, GridComponent, TooltipComponent, LegendComponent, TitleComponent, DataZoomComponent, CanvasRenderer]);

export { echarts };

// A chart in `container`, resized with the window; dispose() when the page goes.
export function chartIn(container: HTMLElement): echarts.ECharts {
  const chart = echarts.init(container, undefined, { renderer: 'canvas' });
  const onResize = () => chart.resize();
  window.addEventListener('resize', onResize);
  const dispose = chart.dispose.bind(chart);
  chart.dispose = () => {
    window.removeEventListener('resize', onResize);
    dispose();
  };
  return chart;
}

export const verdictColors: Record<string, string> = {
  pass: '#3a9d5d',
  violation: '#d64545',
  error: '#b5651d',
  'infra-failure': '#8a8a8a',
  'kernel-crash': '#7b2cbf',
  hang: '#c77d00',
  'boot-failure': '#444',
  inconclusive: '#b8b07a',
  queued: '#cfd8e3',
  leased: '#6fa8dc',
};
