package chainclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// Market returns the price index, utilisation and tier prices of every
// hardware class (or only class, when not empty) with up to history
// closed epochs each, and the open epoch's rewards.
func (c *Client) Market(ctx context.Context, class string, history int) (*apiwire.Market, error) {
	q := url.Values{"history": {strconv.Itoa(history)}}
	if class != "" {
		q.Set("class", class)
	}
	var out apiwire.Market
	_, err := c.do(ctx, http.MethodGet, "/v1/market?"+q.Encode(), nil, &out)
	return &out, err
}
