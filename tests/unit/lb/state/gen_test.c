/* Tests lb/state/gen.c: a generation built from a parsed config has every
 * server of every pool, found by (pool, name) in one lookup, with ids that
 * map back to it; a reload's generation keeps what it shares with the old
 * one by name (a server by pool, name and address: its health, counters
 * and id; a frontend's counters; a pool's queue; an address's sockets) and
 * builds the rest anew, a new server out of rotation until its first
 * probe; and an address another socket listens on fails the build with
 * the file and line of its listen. */
#include <errno.h>

#include "check.h"
#include "lb/lb_fixture.h"

static const char base_conf[] =
    "[global]\nworkers = 1\n"
    "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
    "[pool web]\ncheck = tcp\n"
    "server = a 127.0.0.1:9001\n"
    "server = b 127.0.0.1:9002\n"
    "server = c 127.0.0.1:9003\n"
    "[pool api]\ncheck = none\n"
    "server = a 127.0.0.1:9101\n"
    "server = z 127.0.0.1:9102\n";

static void
test_find_server(void)
{
    struct fx f;
    const struct lb_gen *g;
    struct lb_server *wa, *aa;

    fx_start(&f, base_conf);
    g = f.d.gen;
    CHECK_EQ_INT(g->number, 1);
    CHECK_EQ_INT(g->nservers, 5);
    CHECK_EQ_INT(g->conf->npools, 2);
    wa = lb_gen_find_server(g, "web", "a");
    aa = lb_gen_find_server(g, "api", "a");
    /* one name in two pools: two servers */
    CHECK(wa != NULL && aa != NULL && wa != aa);
    CHECK(wa != NULL && strcmp(wa->conf->addr.text, "127.0.0.1:9001") == 0);
    CHECK(aa != NULL && strcmp(aa->conf->addr.text, "127.0.0.1:9101") == 0);
    CHECK(aa != NULL && aa->pool == &g->pools[1]);
    CHECK(lb_gen_find_server(g, "web", "z") == NULL);   /* z is api's */
    CHECK(lb_gen_find_server(g, "nope", "a") == NULL);
    CHECK(lb_gen_find_server(g, "web", "") == NULL);
    CHECK(lb_gen_find_server(NULL, "web", "a") == NULL);
    /* every server: found, its index and pool right, its id unique and
     * mapping back */
    for (size_t i = 0; i < g->nservers; i++) {
        const struct lb_server *s = g->servers[i];

        CHECK(lb_gen_find_server(g, s->pool->conf->name, s->conf->name) == s);
        CHECK(&s->pool->servers[s->index] == s);
        CHECK(s->b->id < g->nby_id && g->by_id[s->b->id] == s);
        for (size_t k = 0; k < i; k++)
            CHECK(g->servers[k]->b->id != s->b->id);
    }
    /* a fresh start: a checked server starts (counts as up), an unchecked
     * one is up; the first decision put every one in rotation */
    CHECK_EQ_INT(wa->b->health.state, BAL_HEALTH_STARTING);
    CHECK_EQ_INT(aa->b->health.state, BAL_HEALTH_UP);
    for (size_t i = 0; i < g->nservers; i++)
        CHECK(bal_server_in_rotation(g->servers[i]->pool->bal, g->servers[i]->index));
    fx_stop(&f);
}

/* 2000 servers, whose names differ in one character or share a prefix:
 * every one found (the index's collisions resolve), and each is itself. */
static void
test_find_many(void)
{
    enum { N = 2000 };
    size_t cap = N * 48 + 512, len;
    char *text = malloc(cap);
    struct fx f;
    size_t found = 0;

    len = (size_t)snprintf(text, cap, "[global]\nworkers = 1\n"
                           "[frontend web]\nlisten = 127.0.0.1:@\npool = big\n"
                           "[pool big]\ncheck = none\n");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, cap - len, "server = s%d 10.%d.%d.1:80\n", i,
                                i / 250, i % 250);
    fx_start(&f, text);
    for (int i = 0; i < N; i++) {
        char name[16];
        struct lb_server *s;

        snprintf(name, sizeof(name), "s%d", i);
        s = lb_gen_find_server(f.d.gen, "big", name);
        if (s != NULL && strcmp(s->conf->name, name) == 0 && s->index == (size_t)i)
            found++;
    }
    CHECK_EQ_INT(found, N);
    CHECK(lb_gen_find_server(f.d.gen, "big", "s2000") == NULL);
    CHECK(lb_gen_find_server(f.d.gen, "big", "s") == NULL);
    fx_stop(&f);
    free(text);
}

/* The reload: web's b keeps its address, c moves, d is new, a is gone;
 * pool api is gone, pool new comes. */
static const char reload_conf[] =
    "[global]\nworkers = 1\n"
    "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
    "[pool web]\ncheck = tcp\n"
    "server = b 127.0.0.1:9002\n"
    "server = c 127.0.0.1:9013\n"
    "server = d 127.0.0.1:9004\n"
    "[pool new]\ncheck = none\n"
    "server = n 127.0.0.1:9201\n";

static void
test_reload_shares(void)
{
    struct fx f;
    struct lb_gen *g1, *g2;
    struct lb_server *b1, *c1, *b2, *c2, *d2;
    uint32_t b_id;
    size_t held, removed;

    fx_start(&f, base_conf);
    g1 = f.d.gen;
    b1 = fx_server(&f, "web", "b");
    c1 = fx_server(&f, "web", "c");
    b_id = b1->b->id;
    atomic_store(&b1->b->total_connections, 7);     /* a figure to keep */
    atomic_store(&g1->frontends[0].stats->total_connections, 11);
    b1->b->health.state = BAL_HEALTH_UP;             /* a probe passed */

    g2 = fx_gen(&f, reload_conf, g1);
    CHECK_EQ_INT(g2->number, 2);
    CHECK_EQ_INT(g2->nservers, 4);
    b2 = lb_gen_find_server(g2, "web", "b");
    c2 = lb_gen_find_server(g2, "web", "c");
    d2 = lb_gen_find_server(g2, "web", "d");
    CHECK(b2 != NULL && c2 != NULL && d2 != NULL);
    CHECK(lb_gen_find_server(g2, "web", "a") == NULL);
    CHECK(lb_gen_find_server(g2, "api", "z") == NULL);
    if (b2 == NULL || c2 == NULL || d2 == NULL)
        goto out;
    /* kept: the same backend, its id, health and figures */
    CHECK(b2->b == b1->b);
    CHECK_EQ_INT(b2->b->id, b_id);
    CHECK_EQ_INT(atomic_load(&b2->b->total_connections), 7);
    CHECK_EQ_INT(b2->b->health.state, BAL_HEALTH_UP);
    /* an address change is another server: a new id, pending */
    CHECK(c2->b != c1->b);
    CHECK(c2->b->id != c1->b->id);
    CHECK_EQ_INT(c2->b->health.state, BAL_HEALTH_PENDING);
    CHECK_EQ_INT(d2->b->health.state, BAL_HEALTH_PENDING);
    CHECK(d2->b->id != b_id && d2->b->id != c2->b->id);
    CHECK(g2->by_id[d2->b->id] == d2);
    /* new ones are out of rotation until a decision places them */
    CHECK(!bal_server_in_rotation(d2->pool->bal, d2->index));
    /* the pool's queue and figures, the frontend's counters and its
     * sockets are one across both */
    CHECK(g2->pools[0].shared == g1->pools[0].shared);
    CHECK(g2->pools[1].shared != g1->pools[1].shared);
    CHECK(g2->frontends[0].stats == g1->frontends[0].stats);
    CHECK_EQ_INT(atomic_load(&g2->frontends[0].stats->total_connections), 11);
    CHECK(g2->frontends[0].listen == g1->frontends[0].listen);

    /* the decision on the reload: the pending ones stay out until their
     * first probe, the removed a and moved c leave rotation, b stays */
    CHECK_EQ_INT(lb_gen_decide_reserve(&f.d, g2, g1), 0);
    pthread_mutex_lock(&f.d.state_lock);
    removed = lb_gen_decide(&f.d, g2, g1, false, &held);
    pthread_mutex_unlock(&f.d.state_lock);
    CHECK_EQ_INT(removed, 4);           /* web's a and c, api's a and z */
    CHECK(bal_server_in_rotation(b2->pool->bal, b2->index));
    CHECK(!bal_server_in_rotation(d2->pool->bal, d2->index));
    CHECK(!bal_server_in_rotation(c2->pool->bal, c2->index));
    CHECK(!bal_server_in_rotation(c1->pool->bal, c1->index));
    CHECK(c1->b->is_removed);
    CHECK(!b2->b->is_removed);

    /* the old generation goes (its last session ended): what the new one
     * shares lives on (ASan would see a use after free) */
    f.d.gen = g2;
    lb_gen_unref(g1);
    g1 = NULL;
    CHECK_EQ_INT(atomic_load(&b2->b->total_connections), 7);
    CHECK_EQ_INT(atomic_load(&f.d.gen->frontends[0].stats->total_connections), 11);
    CHECK_EQ_INT(atomic_load(&f.d.gen->pools[0].shared->queue.depth), 0);
out:
    if (g1 != NULL) {
        lb_gen_unref(g2);
    }
    fx_stop(&f);
}

/* An address a socket of someone else listens on: the build fails with
 * the file, the listen's line and the address, and frees the config. */
static void
test_address_in_use(void)
{
    struct fx f;
    unsigned port;
    int fd;
    char text[512], err[512], want[128];
    struct lb_gen *g;

    fx_start(&f, base_conf);
    fd = fx_listen_any(&port);
    snprintf(text, sizeof(text), "[global]\nworkers = 1\n"
             "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
             "[frontend other]\nlisten = 127.0.0.1:%u\npool = web\n"
             "[pool web]\ncheck = none\nserver = a 127.0.0.1:9001\n", port);
    {
        char *t = fx_text(text, (unsigned)ntohs(((const struct sockaddr_in *)(const void *)
                                                     &f.listen->addr.ss)->sin_port));

        g = lb_gen_new(fx_conf(t), f.d.gen, &f.listen, 1, 1, &f.d.next_id, err, sizeof(err));
        free(t);
    }
    CHECK(g == NULL);
    snprintf(want, sizeof(want), "test.ini:7: 127.0.0.1:%u is already in use", port);
    CHECK_EQ_STR(g == NULL ? err : "", want);
    if (g != NULL)
        lb_gen_unref(g);
    close(fd);
    fx_stop(&f);
}

int
main(void)
{
    test_find_server();
    test_find_many();
    test_reload_shares();
    test_address_in_use();
    return CHECK_DONE();
}
