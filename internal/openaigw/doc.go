// Package openaigw is every node's OpenAI-compatible endpoint: it answers
// GET /openai/v1/models and POST /openai/v1/chat/completions (streamed and
// not) by routing each request to a ready replica of an active service that
// declares the model and that the caller may use (a public service, or one
// whose keys include the caller's).
//
// The gateway holds no state of its own beyond this node's measurements of
// each replica (latency, requests in flight): which services exist, who may
// use them and where their replicas run come from the ledger through a
// [Directory], and the bytes reach a replica through Options.Dial (the
// relay's Hub.DialReplica in a node). A request goes like this:
//
//  0. on the headers alone, before any byte of the body is read: the
//     caller may use some service that declares models (one is public, or
//     the request carries one of their keys, Directory.Access), else 401
//     at once, and the content type is JSON, else 415;
//  1. validate the body (handler.go, validate.go): a JSON object with a
//     model and messages, numbers in range; unknown fields pass through;
//  2. find the services declaring the model and keep those the caller is
//     authorised for (401 if none, 404 if no service declares it);
//  3. rank their routable replicas by price, latency, load and reputation
//     (route.go) and dial the best, falling back to the next (at most
//     three) on a dial failure or an answer that says the replica did not
//     take the request on (429, 502, 503, 504); 503 no_replica_ready when
//     none could be reached, the last one's answer otherwise;
//  4. send POST /v1/chat/completions to the replica and relay the answer:
//     a whole JSON body that must carry usage, or a server-sent event
//     stream asked for with stream_options.include_usage (stream.go), whose
//     usage chunk always reaches the client before data: [DONE];
//  5. with checks on (check.go): relay the replica's receipt, and check a
//     sample of deterministic requests against other providers' replicas.
//     A request to a service not declared bit-exact (openai.exact) asks
//     for log-probabilities whatever the client asked, and the client's
//     answer loses those it did not ask for, so that a check can tell a
//     float near tie from a wrong answer; only an exact service's
//     outvoted replica is disputed.
//
// Every error is an OpenAI error object ({"error":{"message","type",
// "param","code"}}, errors.go) with the status an OpenAI client expects,
// and no request waits without bound: the dial, the time to the replica's
// first byte and each gap in a stream are limited. The time a body may take
// to arrive is the server's to bound (a node's route: docs/bounds.md).
package openaigw
