"""Renders the Grafana dashboard's panels to one PNG from a Prometheus's query_range API: each
panel's queries as Grafana would send them ($job as every job, $__rate_interval as --rate), laid
out on the dashboard's grid. Not Grafana: a picture of what the queries return, for the docs.

  python3 monitoring/render-dashboard.py --prometheus http://127.0.0.1:9090 \
      --minutes 3 --out docs/dashboard.png   (needs matplotlib: pip install matplotlib)
"""
import argparse
import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

DASHBOARD = Path(__file__).parent / 'grafana' / 'sluice-dashboard.json'
SCALE = {'bytes': (1 / 2**20, 'MiB'), 's': (1000, 'ms'), 'percentunit': (100, '%'), 'reqps': (1, 'req/s'), 'x': (1, 'x')}


def query_range(prometheus, expr, start, end, step):
    url = f'{prometheus}/api/v1/query_range?' + urllib.parse.urlencode({'query': expr, 'start': start, 'end': end, 'step': step})
    with urllib.request.urlopen(url, timeout=30) as res:
        return json.load(res)['data']['result']


def legend(template, metric):
    out = template
    for key, value in metric.items():
        out = out.replace('{{' + key + '}}', value)
    return out


def main():
    args = argparse.ArgumentParser()
    args.add_argument('--prometheus', default='http://127.0.0.1:9090')
    args.add_argument('--minutes', type=float, default=3)
    args.add_argument('--end', type=float, default=None, help='unix time; now when unset')
    args.add_argument('--rate', default='10s', help="what $__rate_interval stands for")
    args.add_argument('--out', default='dashboard.png')
    opts = args.parse_args()
    end = opts.end or time.time()
    start = end - opts.minutes * 60
    step = max(1, round(opts.minutes * 60 / 120))
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard['panels'] if p['type'] != 'row']
    rows = max(p['gridPos']['y'] + p['gridPos']['h'] for p in panels)
    fig = plt.figure(figsize=(16, rows * 0.2))
    grid = fig.add_gridspec(rows, 24, hspace=0, wspace=0, top=0.97, bottom=0.01, left=0.01, right=0.99)
    for panel in panels:
        pos = panel['gridPos']
        ax = fig.add_subplot(grid[pos['y'] + 1:pos['y'] + pos['h'] - 1, pos['x'] + 1:pos['x'] + pos['w'] - 1])
        factor, unit = SCALE.get(panel['fieldConfig']['defaults'].get('unit'), (1, ''))
        for target in panel['targets']:
            expr = target['expr'].replace('$__rate_interval', opts.rate).replace('$job', '.+')
            for series in query_range(opts.prometheus, expr, start, end, step):
                xs = [(float(t) - start) / 60 for t, _ in series['values']]
                ys = [float(v) * factor for _, v in series['values']]
                ax.plot(xs, ys, linewidth=1, label=legend(target['legendFormat'], series['metric'])[:28])
        ax.set_title(panel['title'] + (f' ({unit})' if unit else ''), fontsize=8, loc='left')
        ax.tick_params(labelsize=6)
        ax.set_xlim(0, opts.minutes)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=5, loc='upper left', ncol=2, frameon=False)
    fig.suptitle(f"{dashboard['title']}: the dashboard's queries over {opts.minutes:g} minutes (x: minutes), rendered by monitoring/render-dashboard.py", fontsize=9, y=0.995)
    fig.savefig(opts.out, dpi=72, bbox_inches='tight')


if __name__ == '__main__':
    main()
