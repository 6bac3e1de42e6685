package chainclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Validators returns the ledger's validators (GET /v1/validators).
func (c *Client) Validators(ctx context.Context) (*apiwire.ValidatorList, error) {
	var out apiwire.ValidatorList
	_, err := c.do(ctx, http.MethodGet, "/v1/validators", nil, &out)
	return &out, err
}

// pageQuery is the query of a page of at most apiwire.MaxPageLimit items
// from cursor.
func pageQuery(cursor string) string {
	q := url.Values{"limit": {strconv.Itoa(apiwire.MaxPageLimit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return "?" + q.Encode()
}

// Validator returns one validator, its delegation pool and all its
// delegations (GET /v1/validators/{addr}, every page); addr is its
// operator's address or its consensus address. IsNotFound(err) when no
// validator has it.
func (c *Client) Validator(ctx context.Context, addr string) (*apiwire.ValidatorBody, error) {
	var out apiwire.ValidatorBody
	var all []ledger.DelegationInfo
	for cursor := ""; ; {
		out = apiwire.ValidatorBody{}
		if _, err := c.do(ctx, http.MethodGet, "/v1/validators/"+url.PathEscape(addr)+pageQuery(cursor), nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Delegations...)
		if cursor = out.NextCursor; cursor == "" {
			break
		}
	}
	out.Delegations = all
	return &out, nil
}

// Delegations returns all that a has delegated, is unbonding and has
// redelegated (GET /v1/accounts/{addr}/delegations, every page).
func (c *Client) Delegations(ctx context.Context, a address.Address) (*apiwire.DelegatorBody, error) {
	var out, page apiwire.DelegatorBody
	for cursor := ""; ; {
		page = apiwire.DelegatorBody{}
		if _, err := c.do(ctx, http.MethodGet, "/v1/accounts/"+a.String()+"/delegations"+pageQuery(cursor), nil, &page); err != nil {
			return nil, err
		}
		d, u, r := out.Delegations, out.Unbonding, out.Redelegations
		out = page
		out.Delegations, out.Unbonding, out.Redelegations = append(d, page.Delegations...), append(u, page.Unbonding...), append(r, page.Redelegations...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	return &out, nil
}

// ProviderDelegations returns a provider's delegation pool and all its
// delegations (GET /v1/providers/{addr}/delegations, every page);
// IsNotFound(err) when a is not a registered provider.
func (c *Client) ProviderDelegations(ctx context.Context, a address.Address) (*apiwire.TargetDelegationsBody, error) {
	var out apiwire.TargetDelegationsBody
	var all []ledger.DelegationInfo
	for cursor := ""; ; {
		out = apiwire.TargetDelegationsBody{}
		if _, err := c.do(ctx, http.MethodGet, "/v1/providers/"+a.String()+"/delegations"+pageQuery(cursor), nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Delegations...)
		if cursor = out.NextCursor; cursor == "" {
			break
		}
	}
	out.Delegations = all
	return &out, nil
}
