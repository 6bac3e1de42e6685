package blob

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// NodeAPIURL returns the API URL the gateway's node advertises to other
// nodes (GET /v1/net/peers' api_url): what a job or result records as
// where its data was put (data_at). It fails on a node that does not
// advertise one (an older gpunet).
func (c *Client) NodeAPIURL(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/net/peers", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc().Do(req)
	if err != nil {
		return "", fmt.Errorf("asking the node for its API URL: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("asking the node for its API URL: GET /v1/net/peers answered %s", resp.Status)
	}
	var p struct {
		APIURL string `json:"api_url"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&p); err != nil || p.APIURL == "" {
		return "", fmt.Errorf("asking the node for its API URL: no api_url in its answer")
	}
	return p.APIURL, nil
}

// MarkFetched tells the gateway that the owner of job fetched its outputs
// (POST /v1/jobs/{id}/fetched, signed by the client's Signer), so that the
// node keeps them only a short grace longer.
func (c *Client) MarkFetched(ctx context.Context, job uint64) error {
	if c.Signer == nil {
		return fmt.Errorf("marking job %d's outputs fetched: the client has no key to sign with", job)
	}
	path := "/v1/jobs/" + strconv.FormatUint(job, 10) + "/fetched"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", SignRequest(c.Signer, http.MethodPost, path))
	resp, err := c.hc().Do(req)
	if err != nil {
		return fmt.Errorf("marking job %d's outputs fetched: %w", job, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(fmt.Sprintf("marking job %d's outputs fetched", job), resp)
	}
	return nil
}
