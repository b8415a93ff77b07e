package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads a program's /metrics.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: HTTP %d", url, res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	return families, nil
}

// scrapeLag reads the writer's acceptance-to-MySQL lag histogram, +Inf
// bucket included.
func scrapeLag(ctx context.Context, url string) ([]bucket, error) {
	families, err := scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	f := families["seckill_order_lag_seconds"]
	if f == nil || len(f.GetMetric()) == 0 {
		return nil, fmt.Errorf("metrics %s: no seckill_order_lag_seconds", url)
	}
	var out []bucket
	for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
		out = append(out, bucket{le: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
	}
	return out, nil
}

// scrapeCounter reads an unlabelled counter.
func scrapeCounter(ctx context.Context, url, name string) (float64, error) {
	families, err := scrape(ctx, url)
	if err != nil {
		return 0, err
	}
	f := families[name]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("metrics %s: no %s", url, name)
	}
	return f.GetMetric()[0].GetCounter().GetValue(), nil
}
