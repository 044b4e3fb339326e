package benchkit

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartLabels are the paths' names on the chart, bottom to top.
var chartLabels = map[string]string{
	PathDirect:    "direct stdio",
	PathRelay:     "byte relay",
	PathSocket:    "mcpmux unix",
	PathConnect:   "mcpmux connect",
	PathWS:        "mcpmux ws",
	PathSG:        "supergateway ws",
	PathBridge:    "byte bridge",
	PathHTTPRelay: "http relay",
	PathHTTP:      "mcpmux http",
	PathSGHTTP:    "supergateway http",
	PathProxyHTTP: "mcp-proxy http",
}

var (
	colorP50   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorP99   = color.RGBA{R: 0xae, G: 0xc7, B: 0xe8, A: 0xff}
	colorCalls = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// floorLabels are the rows against a floor on the chart.
var floorLabels = map[string]string{
	PathSocket:         "unix / relay",
	PathConnect:        "connect / bridge",
	PathConnectOwn:     "connect / bridge, both to mcpmux",
	PathWS:             "ws / relay",
	PathHTTP:           "http / http relay",
	PathEndpoint:       "endpoint all / connect",
	PathSessionless:    "2026 POST / 2025 http",
	PathSessionlessNew: "2026 POST, modern srv / 2025 http",
	PathModernSocket:   "modern on modern / unix",
	PathModernOnLegacy: "modern on legacy / unix",
	PathLegacyOnModern: "legacy on modern / unix",
}

// WriteChart draws the figures as a PNG: first the rows against a floor
// (the median ratios of the interleaved rounds, p50 on the left and
// pipelined calls/s on the right), then one row per backend, echo latency
// (p50 and p99) on the left and pipelined calls/s on the right.
func (r *Report) WriteChart(w io.Writer) error {
	backends := Backends()
	floors, err := r.floorPlots()
	if err != nil {
		return err
	}
	plots := make([][]*plot.Plot, len(backends), len(backends)+1)
	for i, be := range backends {
		var labels []string
		var p50, p99, cps plotter.Values
		for _, p := range slices.Backward(Paths()) { // the first path on top
			row := r.Row(be, p)
			if row == nil {
				continue
			}
			labels = append(labels, chartLabels[p])
			p50 = append(p50, float64(row.P50.Nanoseconds())/1e3)
			p99 = append(p99, float64(row.P99.Nanoseconds())/1e3)
			cps = append(cps, row.CallsPerSec)
		}
		if len(labels) == 0 {
			return fmt.Errorf("chart: no figures for %s", be)
		}
		lat, err := barPlot(fmt.Sprintf("%s: echo round trip in µs, p50 (dark) and p99 (light); lower is better", be), labels,
			[]plotter.Values{p50, p99}, []color.Color{colorP50, colorP99})
		if err != nil {
			return err
		}
		thr, err := barPlot(fmt.Sprintf("%s: pipelined calls/s, %d in flight; higher is better", be, r.Counts.InFlight), labels,
			[]plotter.Values{cps}, []color.Color{colorCalls})
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{lat, thr}
	}
	if floors != nil {
		plots = append([][]*plot.Plot{floors}, plots...)
	}
	img := vgimg.NewWith(vgimg.UseWH(13*vg.Inch, 4*vg.Inch*vg.Length(len(plots))), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// floorPlots are the chart's row of ratios against a floor; nil when the
// run measured none.
func (r *Report) floorPlots() ([]*plot.Plot, error) {
	var labels []string
	var p50, cps plotter.Values
	for _, f := range slices.Backward(r.Floors) { // the first row on top
		if len(f.Rounds) == 0 {
			continue
		}
		labels = append(labels, floorLabels[f.Path])
		p50 = append(p50, f.P50Ratio().Med)
		cps = append(cps, f.CPSRatio().Med)
	}
	if len(labels) == 0 {
		return nil, nil
	}
	lat, err := barPlot("each path / its floor, interleaved: echo p50 (median of rounds); lower is better", labels,
		[]plotter.Values{p50}, []color.Color{colorP50})
	if err != nil {
		return nil, err
	}
	thr, err := barPlot("each path / its floor, interleaved: pipelined calls/s (median of rounds); higher is better", labels,
		[]plotter.Values{cps}, []color.Color{colorCalls})
	if err != nil {
		return nil, err
	}
	for _, p := range []*plot.Plot{lat, thr} {
		p.X.Tick.Marker = plot.DefaultTicks{}
		// 1×: the floor itself.
		one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(labels)) - 0.5}})
		if err != nil {
			return nil, err
		}
		one.Color, one.Dashes = color.Black, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(one)
	}
	return []*plot.Plot{lat, thr}, nil
}

// barPlot is a horizontal bar chart, one group of bars per label.
func barPlot(title string, labels []string, groups []plotter.Values, colors []color.Color) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Min = 0
	p.X.Tick.Marker = wholeTicks{}
	grid := plotter.NewGrid()
	grid.Horizontal.Color = nil // only the value lines
	p.Add(grid)
	width := vg.Points(24 / float64(len(groups)))
	for i, vs := range groups {
		bars, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.Color = colors[i]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(len(groups)-1)/2-float64(i)) // the first group on top
		p.Add(bars)
	}
	p.NominalY(labels...)
	return p, nil
}

// wholeTicks are gonum's default ticks, labelled without decimals.
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}
