/* Tests lb/admin/admin_stats.c on a built generation, without the admin
 * thread: /stats and GET /pools/P are well-formed JSON whatever a probe's
 * detail holds, and show what the decisions and the queue did (a server's
 * state, the pool's rotation count and queue figures, the generation);
 * /metrics is well-formed exposition text (every sample after its family's
 * TYPE, each family once, lb_server_state one-hot per server, histogram
 * buckets cumulative up to +Inf = _count) with the family names outside
 * tools depend on and the same figures. */
#include <ctype.h>
#include <stdatomic.h>

#include <event2/buffer.h>

#include "admin.h"
#include "check.h"
#include "data.h"
#include "lb/lb_fixture.h"

/* ------------------------------------------------- a small JSON checker */

struct json {
    const char *p, *end;
    int depth;
};

static bool json_value(struct json *j);

static void
json_ws(struct json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static bool
json_lit(struct json *j, const char *lit)
{
    size_t n = strlen(lit);

    if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
        return false;
    j->p += n;
    return true;
}

static bool
json_string(struct json *j)
{
    if (j->p >= j->end || *j->p != '"')
        return false;
    for (j->p++; j->p < j->end; j->p++) {
        unsigned char c = (unsigned char)*j->p;

        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20)
            return false;               /* control characters must be escaped */
        if (c == '\\') {
            if (++j->p >= j->end)
                return false;
            if (*j->p == 'u') {
                for (int k = 0; k < 4; k++)
                    if (++j->p >= j->end || !isxdigit((unsigned char)*j->p))
                        return false;
            } else if (strchr("\"\\/bfnrt", *j->p) == NULL) {
                return false;
            }
        }
    }
    return false;
}

static bool
json_number(struct json *j)
{
    const char *s = j->p;

    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p >= j->end || !isdigit((unsigned char)*j->p))
        return false;
    if (*j->p == '0' && j->p + 1 < j->end && isdigit((unsigned char)j->p[1]))
        return false;                   /* no leading zeros */
    while (j->p < j->end && isdigit((unsigned char)*j->p))
        j->p++;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (j->p >= j->end || !isdigit((unsigned char)*j->p))
            return false;
        while (j->p < j->end && isdigit((unsigned char)*j->p))
            j->p++;
    }
    return j->p > s;
}

static bool
json_items(struct json *j, char close, bool is_object)
{
    json_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return true;
    }
    for (;;) {
        json_ws(j);
        if (is_object) {
            if (!json_string(j))
                return false;
            json_ws(j);
            if (!json_lit(j, ":"))
                return false;
        }
        if (!json_value(j))
            return false;
        json_ws(j);
        if (json_lit(j, ","))
            continue;
        return json_lit(j, close == '}' ? "}" : "]");
    }
}

static bool
json_value(struct json *j)
{
    bool ok;

    json_ws(j);
    if (j->p >= j->end || ++j->depth > 64)
        return false;
    switch (*j->p) {
    case '{': j->p++; ok = json_items(j, '}', true); break;
    case '[': j->p++; ok = json_items(j, ']', false); break;
    case '"': ok = json_string(j); break;
    case 't': ok = json_lit(j, "true"); break;
    case 'f': ok = json_lit(j, "false"); break;
    case 'n': ok = json_lit(j, "null"); break;
    default: ok = json_number(j); break;
    }
    j->depth--;
    return ok;
}

/* One JSON document, then only a newline. */
static bool
json_valid(const char *s, size_t len)
{
    struct json j = { s, s + len, 0 };

    if (!json_value(&j))
        return false;
    json_ws(&j);
    return j.p == j.end;
}

/* ------------------------------------------------------------ fixtures */

/* The document as a NUL-terminated string (the caller frees it). */
static char *
take(struct evbuffer *b, size_t *len)
{
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);

    evbuffer_remove(b, s, n);
    s[n] = '\0';
    *len = n;
    return s;
}

/* The text of "key": right after the object of server `name` begins in
 * doc, up to the next comma or brace (a string value keeps its quotes). */
static const char *
server_field(const char *doc, const char *name, const char *key, char *out, size_t outlen)
{
    char pat[128];
    const char *s, *v;
    size_t n;

    snprintf(pat, sizeof(pat), "{\"name\":\"%s\",\"address\":", name);
    s = strstr(doc, pat);
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    if (s == NULL || (v = strstr(s, pat)) == NULL) {
        snprintf(out, outlen, "(none)");
        return out;
    }
    v += strlen(pat);
    n = strcspn(v, ",}");
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen - 1), v);
    return out;
}

static const char conf_text[] =
    "[global]\nworkers = 1\nmax_connections = 500\n"
    "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
    "[pool web]\ncheck = tcp\nfall = 1\nqueue_max = 2\n"
    "server = a 127.0.0.1:9001\n"
    "server = b 127.0.0.1:9002\n"
    "server = c 127.0.0.1:9003 max_connections=1\n"
    "[pool api]\ncheck = none\n"
    "server = x 127.0.0.1:9101\n";

/* a failed its probe with a detail of quotes, a backslash, a newline and a
 * control byte; b drained; c at its cap with two clients queued behind
 * it, one refused by queue_max and one that timed out. The waiter left
 * queued is returned, to leave before the fixture stops. */
static struct lb_waiter *
run(struct fx *f)
{
    static struct lb_waiter wt[4];
    struct lb_server *c;
    struct lb_pool *p;

    fx_start(f, conf_text);
    p = &f->d.gen->pools[0];
    fx_probe(f, fx_server(f, "web", "a"), false, "HTTP 500 \"x\" \\ \n\001 end");
    pthread_mutex_lock(&f->d.state_lock);
    lb_server_set_admin(&f->d, fx_server(f, "web", "b"), BAL_ADMIN_DRAIN);
    pthread_mutex_unlock(&f->d.state_lock);
    c = fx_server(f, "web", "c");
    CHECK(bal_server_take_slot(p->bal, c->index));
    for (int i = 0; i < 4; i++)
        wt[i] = (struct lb_waiter){ .pool = p, .since_ms = lb_mono_ms(), .granted = -1 };
    CHECK(lb_queue_join(&wt[0]));
    CHECK(lb_queue_join(&wt[1]));
    CHECK(!lb_queue_join(&wt[2]));      /* queue_max = 2 */
    CHECK(lb_queue_leave(&wt[0], true));
    atomic_store(&f->d.gen->frontends[0].stats->total_connections, 42);
    return &wt[1];
}

static void
test_json_str(void)
{
    struct evbuffer *b = evbuffer_new();
    size_t len;
    char *s;

    lb_json_str(b, "q\"b\\s\n\t\001\x7f\xc3\xa9/");
    s = take(b, &len);
    CHECK_EQ_STR(s, "\"q\\\"b\\\\s\\u000a\\u0009\\u0001\x7f\xc3\xa9/\"");
    CHECK(json_valid(s, len));
    free(s);
    lb_json_str(b, "");
    s = take(b, &len);
    CHECK_EQ_STR(s, "\"\"");
    free(s);
    evbuffer_free(b);
}

static void
test_stats_json(void)
{
    struct fx f;
    struct lb_waiter *left;
    struct evbuffer *b = evbuffer_new();
    char v[256], want[64];
    size_t len;
    char *s;

    left = run(&f);
    CHECK_EQ_INT(lb_admin_stats_json(&f.d, b), 0);
    s = take(b, &len);
    CHECK(json_valid(s, len));
    CHECK(len > 0 && s[len - 1] == '\n');
    CHECK(strstr(s, "\"frontends\":[{\"name\":\"web\"") != NULL);
    CHECK(strstr(s, "\"total_connections\":42,\"denied\":{\"acl\":0,") != NULL);
    CHECK_EQ_STR(server_field(s, "a", "state", v, sizeof(v)), "\"down\"");
    CHECK_EQ_STR(server_field(s, "a", "consecutive_failures", v, sizeof(v)), "1");
    CHECK_EQ_STR(server_field(s, "a", "result", v, sizeof(v)), "\"failed\"");
    CHECK(strstr(s, "\"detail\":\"HTTP 500 \\\"x\\\" \\\\ \\u000a\\u0001 end\"") != NULL);
    CHECK_EQ_STR(server_field(s, "b", "state", v, sizeof(v)), "\"draining\"");
    CHECK_EQ_STR(server_field(s, "b", "admin", v, sizeof(v)), "\"drain\"");
    CHECK_EQ_STR(server_field(s, "c", "state", v, sizeof(v)), "\"up\"");
    CHECK_EQ_STR(server_field(s, "c", "active_connections", v, sizeof(v)), "1");
    CHECK_EQ_STR(server_field(s, "c", "max_connections", v, sizeof(v)), "1");
    CHECK_EQ_STR(server_field(s, "x", "state", v, sizeof(v)), "\"up\"");
    CHECK(strstr(s, "{\"name\":\"web\",\"balance\":\"roundrobin\",\"check\":\"tcp\","
                    "\"servers_total\":3,\"in_rotation\":1,") != NULL);
    CHECK(strstr(s, "\"queue\":{\"depth\":1,\"max\":2,\"timeout_ms\":5000,\"queued_total\":2,"
                    "\"timeouts_total\":1,\"full_total\":1,") != NULL);
    CHECK(strstr(s, "\"connections\":{\"active\":0,\"max\":500}") != NULL);
    snprintf(want, sizeof(want), "\"generation\":%llu,", (unsigned long long)f.d.gen->number);
    CHECK(strstr(s, want) != NULL);
    CHECK(strstr(s, "\"health\":{\"checks_total\":1,") != NULL);
    CHECK(strstr(s, "\"last_error\":null}}") != NULL);
    free(s);

    /* one pool: the same object, alone; no such pool: 1, nothing written */
    CHECK_EQ_INT(lb_admin_pool_json(&f.d, "api", b), 0);
    s = take(b, &len);
    CHECK(json_valid(s, len));
    CHECK(strncmp(s, "{\"name\":\"api\",", 14) == 0);
    CHECK_EQ_STR(server_field(s, "x", "state", v, sizeof(v)), "\"up\"");
    CHECK(strstr(s, "\"name\":\"a\"") == NULL);
    free(s);
    CHECK_EQ_INT(lb_admin_pool_json(&f.d, "nope", b), 1);
    CHECK_EQ_INT(evbuffer_get_length(b), 0);

    CHECK(lb_queue_leave(left, false));
    evbuffer_free(b);
    fx_stop(&f);
}

/* ------------------------------------------------------------- metrics */

#define MAX_FAMILIES 128

struct families {
    char name[MAX_FAMILIES][64];
    char type[MAX_FAMILIES][16];
    size_t n;
};

/* The family a sample belongs to: its name, less a histogram's suffix. */
static const char *
family_of(const struct families *fs, const char *sample, size_t len)
{
    for (size_t i = 0; i < fs->n; i++) {
        size_t n = strlen(fs->name[i]);

        if (len == n && strncmp(sample, fs->name[i], n) == 0)
            return fs->type[i];
        if (strcmp(fs->type[i], "histogram") == 0 && len > n &&
            strncmp(sample, fs->name[i], n) == 0 &&
            (strncmp(sample + n, "_bucket", len - n) == 0 ||
             strncmp(sample + n, "_sum", len - n) == 0 ||
             strncmp(sample + n, "_count", len - n) == 0))
            return fs->type[i];
    }
    return NULL;
}

/* The value of the sample line that starts with `series ` (NAME{LABELS}),
 * or -1. */
static double
sample(const char *doc, const char *series)
{
    size_t n = strlen(series);

    for (const char *l = doc; l != NULL && *l != '\0';) {
        const char *nl = strchr(l, '\n');

        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
        l = nl != NULL ? nl + 1 : NULL;
    }
    return -1;
}

/* Every line: a HELP, a TYPE (one per family, a known type, before its
 * samples), or a sample NAME[{LABELS}] VALUE of a declared family. */
static void
check_exposition(const char *doc, struct families *fs)
{
    size_t bad = 0;

    fs->n = 0;
    for (const char *l = doc; *l != '\0';) {
        const char *nl = strchr(l, '\n');
        size_t len = nl != NULL ? (size_t)(nl - l) : strlen(l);
        char name[64], type[16];

        if (nl == NULL) {
            bad++;                      /* the last line ends too */
            break;
        }
        if (strncmp(l, "# TYPE ", 7) == 0) {
            if (sscanf(l, "# TYPE %63s %15s", name, type) != 2 ||
                (strcmp(type, "gauge") != 0 && strcmp(type, "counter") != 0 &&
                 strcmp(type, "histogram") != 0) ||
                family_of(fs, name, strlen(name)) != NULL || fs->n == MAX_FAMILIES) {
                fprintf(stderr, "bad TYPE line: %.*s\n", (int)len, l);
                bad++;
            } else {
                snprintf(fs->name[fs->n], sizeof(fs->name[0]), "%s", name);
                snprintf(fs->type[fs->n], sizeof(fs->type[0]), "%s", type);
                fs->n++;
            }
        } else if (strncmp(l, "# HELP ", 7) != 0) {
            size_t nlen = strcspn(l, "{ ");
            const char *v = memchr(l, ' ', len);
            char *end;

            if (l[nlen] == '{') {
                /* labels: key="value" pairs; the value may hold escaped
                 * quotes, never a raw newline (it is one line) */
                const char *close = l + nlen;

                for (close++; close < l + len && *close != '}'; close++) {
                    if (*close == '"')
                        for (close++; close < l + len && *close != '"'; close++)
                            if (*close == '\\')
                                close++;
                }
                v = close < l + len ? close + 1 : NULL;
            }
            if (family_of(fs, l, nlen) == NULL || v == NULL || *v != ' ' ||
                (strtod(v + 1, &end), end != nl)) {
                fprintf(stderr, "bad sample line: %.*s\n", (int)len, l);
                bad++;
            }
        }
        l = nl + 1;
    }
    CHECK_EQ_INT(bad, 0);
}

static void
test_metrics(void)
{
    static const char *const names[] = {
        "lb_info", "lb_uptime_seconds", "lb_active_connections", "lb_max_connections",
        "lb_frontend_active_connections", "lb_frontend_connections_total",
        "lb_frontend_retries_total", "lb_frontend_no_server_total",
        "lb_frontend_accept_failures_total", "lb_max_connections_reached_total",
        "lb_pool_servers", "lb_pool_guard_active", "lb_pool_in_rotation", "lb_pool_min_servers",
        "lb_pool_queue_depth", "lb_pool_queued_total", "lb_pool_queue_timeouts_total",
        "lb_pool_queue_full_total", "lb_server_up", "lb_server_active_connections",
        "lb_server_connections_total", "lb_server_bytes_in_total", "lb_server_bytes_out_total",
        "lb_server_connect_failures_total", "lb_server_drained_by_timeout_total",
        "lb_server_observed_probes_total", "lb_server_guarded", "lb_server_checks_total",
        "lb_server_consecutive_failures", "lb_server_max_connections", "lb_server_state",
        "lb_check_duration_seconds", "lb_pool_queue_wait_seconds", "lb_pool_connect_seconds",
        "lb_pool_session_duration_seconds", "lb_check_lag_seconds", "lb_detection_seconds",
        "lb_reloads_total", "process_open_fds", "process_max_fds",
        "process_resident_memory_bytes", "process_cpu_seconds_total",
        "process_start_time_seconds",
    };
    static const char *const states[] = { "up", "draining", "down", "disabled", "warning" };
    static const char *const servers[][3] = {
        { "web", "a", "down" }, { "web", "b", "draining" }, { "web", "c", "up" },
        { "api", "x", "up" },
    };
    static struct families fs;
    struct fx f;
    struct lb_waiter *left;
    struct evbuffer *b = evbuffer_new();
    size_t len;
    char *s, series[160];

    left = run(&f);
    CHECK_EQ_INT(lb_admin_metrics(&f.d, b), 0);
    s = take(b, &len);
    check_exposition(s, &fs);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (family_of(&fs, names[i], strlen(names[i])) == NULL)
            fprintf(stderr, "no family %s\n", names[i]);
        CHECK(family_of(&fs, names[i], strlen(names[i])) != NULL);
    }
    CHECK(sample(s, "lb_max_connections") == 500);
    CHECK(sample(s, "lb_frontend_connections_total{frontend=\"web\"}") == 42);
    CHECK(sample(s, "lb_pool_servers{pool=\"web\"}") == 3);
    CHECK(sample(s, "lb_pool_in_rotation{pool=\"web\"}") == 1);
    CHECK(sample(s, "lb_pool_in_rotation{pool=\"api\"}") == 1);
    CHECK(sample(s, "lb_pool_queue_depth{pool=\"web\"}") == 1);
    CHECK(sample(s, "lb_pool_queued_total{pool=\"web\"}") == 2);
    CHECK(sample(s, "lb_pool_queue_timeouts_total{pool=\"web\"}") == 1);
    CHECK(sample(s, "lb_pool_queue_full_total{pool=\"web\"}") == 1);
    CHECK(sample(s, "lb_pool_queue_depth{pool=\"api\"}") == 0);
    CHECK(sample(s, "lb_server_up{pool=\"web\",server=\"a\"}") == 0);
    CHECK(sample(s, "lb_server_up{pool=\"web\",server=\"c\"}") == 1);
    CHECK(sample(s, "lb_server_active_connections{pool=\"web\",server=\"c\"}") == 1);
    CHECK(sample(s, "lb_server_max_connections{pool=\"web\",server=\"c\"}") == 1);
    CHECK(sample(s, "lb_server_checks_total{pool=\"web\",server=\"a\"}") == 1);
    CHECK(sample(s, "lb_server_consecutive_failures{pool=\"web\",server=\"a\"}") == 1);
    /* one-hot: the server's state 1, the four others 0 */
    for (size_t i = 0; i < sizeof(servers) / sizeof(servers[0]); i++) {
        for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
            snprintf(series, sizeof(series), "lb_server_state{pool=\"%s\",server=\"%s\",state=\"%s\"}",
                     servers[i][0], servers[i][1], states[k]);
            if (sample(s, series) != (strcmp(states[k], servers[i][2]) == 0))
                fprintf(stderr, "%s is %g\n", series, sample(s, series));
            CHECK(sample(s, series) == (strcmp(states[k], servers[i][2]) == 0));
        }
    }
    /* the probe's duration (2 ms) in web's histogram: cumulative buckets,
     * +Inf and _count the probes, _sum in seconds */
    {
        double prev = 0;
        size_t nb = 0;

        for (const char *l = strstr(s, "lb_check_duration_seconds_bucket{pool=\"web\",");
             l != NULL && strncmp(l, "lb_check_duration_seconds_bucket{pool=\"web\",", 44) == 0;
             l = strchr(l, '\n') + 1) {
            double v = strtod(strchr(l, ' ') + 1, NULL);

            CHECK(v >= prev);
            prev = v;
            nb++;
        }
        CHECK_EQ_INT(nb, LB_HIST_BUCKETS + 1);
        CHECK(sample(s, "lb_check_duration_seconds_bucket{pool=\"web\",le=\"+Inf\"}") == 1);
        CHECK(sample(s, "lb_check_duration_seconds_count{pool=\"web\"}") == 1);
        CHECK(sample(s, "lb_check_duration_seconds_sum{pool=\"web\"}") == 0.002);
        CHECK(sample(s, "lb_check_duration_seconds_bucket{pool=\"web\",le=\"0.001\"}") == 0);
        CHECK(sample(s, "lb_check_duration_seconds_bucket{pool=\"web\",le=\"0.0025\"}") == 1);
        CHECK(sample(s, "lb_check_duration_seconds_count{pool=\"api\"}") == 0);
    }
    CHECK(sample(s, "lb_reloads_total{result=\"ok\"}") == 0);
    CHECK(sample(s, "process_start_time_seconds") > 0);
    free(s);
    CHECK(lb_queue_leave(left, false));
    evbuffer_free(b);
    fx_stop(&f);
}

int
main(void)
{
    test_json_str();
    test_stats_json();
    test_metrics();
    return CHECK_DONE();
}
