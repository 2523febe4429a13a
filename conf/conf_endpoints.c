/*
 * conf_endpoints.c - discover_endpoints: the URLs of a registry's HTTP
 * gateway (etcd's), "http://127.0.0.1:2379, https://10.0.0.2:2379",
 * tried in turn. The config check and the discovery that dials them read
 * them with this one parser.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_value.h"

/* etcd's client port, when a URL gives none */
#define CONF_ENDPOINT_PORT 2379

/* One URL of len bytes at s into out: 0, or -1 with why in err. */
static int
conf_endpoint_parse(const char *s, size_t len, struct conf_endpoint *out, char *err,
                    size_t errlen)
{
    const char *end = s + len, *host, *host_end, *colon = NULL;
    unsigned long port = CONF_ENDPOINT_PORT;

    memset(out, 0, sizeof(*out));
    if (len > 7 && strncmp(s, "http://", 7) == 0) {
        host = s + 7;
    } else if (len > 8 && strncmp(s, "https://", 8) == 0) {
        host = s + 8;
        out->is_tls = true;
    } else {
        snprintf(err, errlen, "\"%.*s\" is not an http:// or https:// URL", (int)len, s);
        return -1;
    }
    if (end[-1] == '/')
        end--;                          /* "http://h:2379/": the same */
    if (host < end && *host == '[') {   /* [v6] */
        host_end = memchr(host, ']', (size_t)(end - host));
        if (host_end == NULL) {
            snprintf(err, errlen, "\"%.*s\": an IPv6 address without its ']'", (int)len, s);
            return -1;
        }
        host++;
        colon = host_end + 1 < end ? host_end + 1 : NULL;
        if (colon != NULL && *colon != ':') {
            snprintf(err, errlen, "\"%.*s\": junk after the address", (int)len, s);
            return -1;
        }
    } else {
        colon = memchr(host, ':', (size_t)(end - host));
        host_end = colon != NULL ? colon : end;
    }
    if (host_end == host || (size_t)(host_end - host) > CONF_HOST_MAX ||
        memchr(host, '/', (size_t)(host_end - host)) != NULL) {
        snprintf(err, errlen, "\"%.*s\": no host, or a path (give scheme://host:port)", (int)len,
                 s);
        return -1;
    }
    if (colon != NULL) {
        char digits[8];
        size_t n = (size_t)(end - colon - 1);
        char *stop;

        if (n == 0 || n >= sizeof(digits)) {
            snprintf(err, errlen, "\"%.*s\": the port is not 1 to 65535", (int)len, s);
            return -1;
        }
        memcpy(digits, colon + 1, n);
        digits[n] = '\0';
        port = strtoul(digits, &stop, 10);
        if (*stop != '\0' || digits[0] < '0' || digits[0] > '9' || port == 0 || port > 65535) {
            snprintf(err, errlen, "\"%.*s\": the port is not 1 to 65535", (int)len, s);
            return -1;
        }
    }
    memcpy(out->host, host, (size_t)(host_end - host));
    out->port = (uint16_t)port;
    return 0;
}

int
conf_endpoints_parse(const char *text, struct conf_endpoint *out, size_t max, char *err,
                     size_t errlen)
{
    const char *p = text, *item;
    bool more = true;
    size_t n = 0, len;
    char why[CONF_HOST_MAX + 96];

    while (more) {
        len = conf_list_next(&p, &item, &more);
        if (len == 0) {
            snprintf(err, errlen, "\"%s\" has an empty URL (URLs are separated by commas)",
                     text);
            return -1;
        }
        if (n == max) {
            snprintf(err, errlen, "more than %zu URLs", max);
            return -1;
        }
        if (conf_endpoint_parse(item, len, &out[n], why, sizeof(why)) != 0) {
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        n++;
    }
    return (int)n;
}
