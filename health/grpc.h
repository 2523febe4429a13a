/*
 * grpc.h - the gRPC check (grpc.health.v1.Health/Check) as a pure
 * conversation over HTTP/2, driven by nghttp2 in memory.
 *
 * As the protocol checks of talk.h, nothing here touches a socket: probe.c
 * moves the bytes, so the whole exchange is unit-tested and fuzzed on
 * bytes. The verdict carries the server's own words: "SERVING",
 * "NOT_SERVING", "SERVICE_UNKNOWN", "12 UNIMPLEMENTED: Method not found",
 * "the server reset the stream (REFUSED_STREAM)".
 *
 * Memory is bounded: the response message is kept up to HC_GRPC_MESSAGE_MAX
 * bytes, and a server that sends more than HC_GRPC_IN_MAX bytes in all
 * (headers without end, endless SETTINGS or PINGs) fails the check, so an
 * hostile peer costs nghttp2's session and these buffers, never more.
 */
#ifndef HC_GRPC_H
#define HC_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* All that a server may send in one check: its SETTINGS, the response
 * headers, a message of a few bytes and the trailers take a few hundred. */
#define HC_GRPC_IN_MAX (64 * 1024)
/* A HealthCheckResponse is 2 bytes; room for fields a newer one adds. */
#define HC_GRPC_MESSAGE_MAX 256

struct hc_grpc;

/* A conversation asking for service ("" = the whole server, at most
 * CONF_CHECK_NAME_MAX bytes) with authority as :authority (check_host,
 * else the server's address), over TLS or not (its :scheme). The strings
 * are copied. NULL when out of memory. */
struct hc_grpc *hc_grpc_new(const char *authority, const char *service, bool is_tls);
void hc_grpc_free(struct hc_grpc *g);

/* The bytes to send next (the connection preface, the request, window
 * updates, acknowledgements): their length, 0 when nothing is to be sent
 * now. *out stays valid until hc_grpc_sent. */
size_t hc_grpc_output(struct hc_grpc *g, const uint8_t **out);
/* n bytes of the output were sent (n <= its length). */
void hc_grpc_sent(struct hc_grpc *g, size_t n);

/* n bytes came from the server; ignored once there is a verdict. */
void hc_grpc_feed(struct hc_grpc *g, const uint8_t *buf, size_t n);
/* The server closed the connection: a verdict if none yet. */
void hc_grpc_closed(struct hc_grpc *g);

/* True once decided, with the verdict in *passed and *detail (valid while
 * g lives). */
bool hc_grpc_verdict(const struct hc_grpc *g, bool *passed, const char **detail);

/* After the verdict: queues a GOAWAY (NO_ERROR) as the output, so that the
 * server sees a client leaving. */
void hc_grpc_goodbye(struct hc_grpc *g);

/* What the exchange waits for, for a timeout's detail ("the gRPC response
 * headers"). */
const char *hc_grpc_waiting_for(const struct hc_grpc *g);

#endif /* HC_GRPC_H */
