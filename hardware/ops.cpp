#include "hardware/ops.hpp"

#include <memory>

namespace twin::hardware {

namespace {

void run_grid(sim::Task& t, Cluster& c, Gpu& g, KernelWork w) {
  const double sm_s = w.alone_s * g.sm_count();
  const sim::Fluid::Use uses[] = {{g.sm_resource(), 1.0}, {g.hbm_resource(), w.hbm_bytes / sm_s}};
  c.fluid().start(sm_s, std::span(uses, w.hbm_bytes > 0 ? 2 : 1), g.sm_count(),
                  [&t] { t.finish(); }, g.sm_count());
}

// The state of a persistent kernel lives in the cluster's arena and callbacks capture only a
// pointer to it (and a count): they fit std::function's inline buffer, no allocation per kernel.
struct StaticRun {
  sim::Task* t;
  Cluster* c;
  Gpu* g;
  sim::Time block_time;
  int blocks;
  int done;
};

void run_static(sim::Task& t, Cluster& c, Gpu& g, KernelWork w) {
  auto* st = c.make<StaticRun>(&t, &c, &g, sim::Time::s(w.alone_s), g.sm_count(), 0);
  g.request(st->blocks, Gpu::Holder::persistent, [st](int k) {
    st->c->engine().after(st->block_time, [st, k] {
      st->g->release(k, Gpu::Holder::persistent);
      if ((st->done += k) == st->blocks) st->t->finish();
    }, sim::Priority::completion);
  });
}

struct DynamicRun {
  sim::Task* t;
  Cluster* c;
  Gpu* g;
  int held;
  sim::Fluid::FlowId flow;
  Gpu::RequestId req;
};

void run_dynamic(sim::Task& t, Cluster& c, Gpu& g, KernelWork w) {
  auto* st = c.make<DynamicRun>(&t, &c, &g, 0, sim::Fluid::FlowId{0}, Gpu::RequestId{0});
  const double sm_s = w.alone_s * g.sm_count();
  const sim::Fluid::Use hbm[] = {{g.hbm_resource(), w.hbm_bytes / sm_s}};
  st->flow = c.fluid().start(sm_s, std::span(hbm, w.hbm_bytes > 0 ? 1 : 0), 0.0, [st] {
    st->g->cancel(st->req);  // blocks still waiting find the tile counter exhausted
    st->g->release(st->held, Gpu::Holder::persistent);
    st->t->finish();
  }, g.sm_count());
  st->req = g.request(g.sm_count(), Gpu::Holder::persistent, [st](int k) {
    st->held += k;
    st->c->fluid().set_bound(st->flow, st->held);
  });
}

}  // namespace

namespace {
struct KernelCall {
  Cluster* c;
  int gpu;
  KernelWork w;
};
struct CopyCall {
  Cluster* c;
  int gpu;
  CopyDir dir;
  double bytes;
};
}  // namespace

// The calls live in the cluster's arena: a capture of one pointer fits std::function's inline
// buffer, so a task costs no allocation of its own (a step has about a million).
void run_kernel(sim::Task& t, Cluster& c, int gpu, KernelWork w) {
  t.on_ready = [k = c.make<KernelCall>(&c, gpu, w)](sim::Task& task) {
    if (k->w.alone_s <= 0) return task.finish();
    Cluster& c = *k->c;
    Gpu& g = c.gpu(k->gpu);
    KernelWork w = k->w;
    w.alone_s /= g.speed();
    switch (w.cls) {
      case KernelClass::grid: return run_grid(task, c, g, w);
      case KernelClass::persistent_static: return run_static(task, c, g, w);
      case KernelClass::persistent_dynamic: return run_dynamic(task, c, g, w);
    }
  };
}

void run_copy(sim::Task& t, Cluster& c, int gpu, CopyDir dir, double bytes) {
  t.on_ready = [k = c.make<CopyCall>(&c, gpu, dir, bytes)](sim::Task& task) {
    const auto [cp, gpu, dir, bytes] = *k;
    if (bytes <= 0) return task.finish();
    Cluster& c = *cp;
    const auto& l = c.links(gpu);
    const auto hbm = l.hbm;
    sim::Fluid::Use uses[2] = {{hbm, 2.0}, {hbm, 0.0}};  // d2d: read + write
    std::size_t n = 1;
    if (dir != CopyDir::d2d) {
      uses[0] = {dir == CopyDir::h2d ? l.h2d : l.d2h, 1.0};
      uses[1] = {hbm, 1.0};
      n = 2;
    }
    c.fluid().start(bytes, std::span(uses, n), sim::Fluid::kUnbounded, [&task] { task.finish(); });
  };
}

void run_cpu(sim::Task& t, Cluster& c, int gpu, double core_s, double max_cores) {
  t.on_ready = [&c, gpu, core_s, max_cores](sim::Task& task) {
    if (core_s <= 0) return task.finish();
    c.fluid().start(core_s, {{c.links(gpu).cpu, 1.0}}, max_cores, [&task] { task.finish(); });
  };
}

void run_delay(sim::Task& t, Cluster& c, sim::Time d) {
  t.on_ready = [&c, d](sim::Task& task) {
    c.engine().after(d, [&task] { task.finish(); }, sim::Priority::completion);
  };
}

}  // namespace twin::hardware
