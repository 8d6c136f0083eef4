#include "hardware/ops.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace twin::hardware {

namespace {

// A grid kernel's state, in the cluster's arena: a flow of its time alone (seconds of work at
// full speed), bounded by its speed at its share of the free SMs, re-bounded whenever the share
// changes (the listener is the first member: the callback casts back).
struct FluidRun {
  SmListener listener;
  sim::Task* t;
  Cluster* c;
  Gpu* g;
  sim::Fluid::FlowId flow;
  bool started;
  bool waiting;  // no block has run yet: its interval starts at the first (Task::mark_started)
  const KernelPart* parts;      // a fused run's kernels, or null
  Cluster::Prepared* prepared;  // for each of them (fused), or for the kernel (`own`)
  std::uint32_t n_parts;
  KernelShape shape;  // the kernel's shape and time alone when not fused
  double alone_s;
  Cluster::Prepared own;
};

// `sms`: the free SMs the kernel gets (gpu.hpp); the rest are held by NCCL (which leaves room
// beside its CTAs) or persistent kernels (which leave none). Behind another grid kernel or a
// request still waiting (kBehind), or with every SM held and none by NCCL, it waits.
double fluid_speed(const FluidRun& r, int sms) {
  if (sms == SmListener::kBehind || (sms == 0 && r.g->nccl_sms() == 0)) return 0.0;
  const int held = r.c->contention().sm_count - sms, lending = std::min(held, r.g->nccl_sms());
  if (r.parts == nullptr)
    return 1.0 / r.c->contention_slowdown(r.shape, held, r.alone_s, lending, *r.prepared);
  double t = 0, slowed = 0;
  for (std::uint32_t i = 0; i < r.n_parts; ++i) {
    const KernelPart& p = r.parts[i];
    t += p.alone_s;
    slowed +=
        p.alone_s * r.c->contention_slowdown(p.shape, held, p.alone_s, lending, r.prepared[i]);
  }
  return slowed > 0 ? t / slowed : 1.0;
}

void rebound(SmListener* l, int sms) {
  auto* r = reinterpret_cast<FluidRun*>(l);
  if (!r->started) return;
  const double v = fluid_speed(*r, sms);
  if (r->waiting && v > 0) {
    r->waiting = false;
    r->t->mark_started();
  }
  r->c->fluid().set_bound(r->flow, v);
}

void run_grid(sim::Task& t, Cluster& c, Gpu& g, double alone_s, double hbm_bytes, KernelShape shape,
              const KernelPart* parts, Cluster::Prepared* prepared, std::uint32_t n_parts,
              Gpu::Priority priority) {
  static_assert(std::is_trivially_destructible_v<FluidRun>);
  auto* st =
      new (c.take_transient(sizeof(FluidRun), alignof(FluidRun))) FluidRun{SmListener{rebound},
                                                                           &t,
                                                                           &c,
                                                                           &g,
                                                                           sim::Fluid::FlowId{0},
                                                                           false,
                                                                           false,
                                                                           parts,
                                                                           prepared,
                                                                           n_parts,
                                                                           shape,
                                                                           alone_s,
                                                                           {}};
  if (!parts) st->prepared = &st->own;
  g.listen(&st->listener, priority);  // told the SMs it gets from now on
  const sim::Fluid::Use hbm[] = {{g.hbm_resource(), hbm_bytes / alone_s}};
  const double speed = fluid_speed(*st, g.share_of(&st->listener));
  st->waiting = speed == 0;
  st->flow = c.fluid().start(
      alone_s, std::span(hbm, hbm_bytes > 0 ? 1 : 0), speed,
      [st] {
        st->g->unlisten(&st->listener);
        sim::Task* t = st->t;
        st->c->give_back_transient(st);
        t->finish();
      },
      1.0);
  st->started = true;
}

// Per-SM rate of a family's blocks with `active` of them running, relative to all SMs busy
// (contention.hpp: power-capped clocks, bandwidth saturation).
double per_sm_rate(const ContentionModel& m, Family f, int active) {
  return (m.throughput(f, active) / active) / (m.throughput(f, m.sm_count) / m.sm_count);
}

// The state of a persistent kernel lives in the cluster's arena and callbacks capture only a
// pointer to it (and a count): they fit std::function's inline buffer, no allocation per kernel.
struct StaticRun {
  sim::Task* t;
  Cluster* c;
  Gpu* g;
  double block_s;
  int blocks;
  int done;
  int running;
  Family family;
};

void run_static(sim::Task& t, Cluster& c, Gpu& g, KernelWork w) {
  auto* st = c.make<StaticRun>(&t, &c, &g, w.alone_s, g.sm_count(), 0, 0, w.shape.family);
  g.request(
      st->blocks, Gpu::Holder::persistent,
      [st](int k) {
        if (st->running + st->done == 0) st->t->mark_started();  // its first block
        st->running += k;
        const double s = st->block_s / per_sm_rate(st->c->contention(), st->family, st->running);
        st->c->engine().after(
            sim::Time::s(s),
            [st, k] {
              st->g->release(k, Gpu::Holder::persistent);
              st->running -= k;
              if ((st->done += k) == st->blocks) st->t->finish();
            },
            sim::Priority::completion);
      },
      w.priority);
}

struct DynamicRun {
  sim::Task* t;
  Cluster* c;
  Gpu* g;
  int held;
  sim::Fluid::FlowId flow;
  Gpu::RequestId req;
  KernelShape shape;
};

void run_dynamic(sim::Task& t, Cluster& c, Gpu& g, KernelWork w) {
  auto* st = c.make<DynamicRun>(&t, &c, &g, 0, sim::Fluid::FlowId{0}, Gpu::RequestId{0}, w.shape);
  st->shape.schedule = Schedule::persistent_dynamic;
  const double sm_s = w.alone_s * g.sm_count();
  const sim::Fluid::Use hbm[] = {{g.hbm_resource(), w.hbm_bytes / sm_s}};
  st->flow = c.fluid().start(
      sm_s, std::span(hbm, w.hbm_bytes > 0 ? 1 : 0), 0.0,
      [st] {
        st->g->cancel(st->req);  // blocks still waiting find the tile counter exhausted
        st->g->release(st->held, Gpu::Holder::persistent);
        st->t->finish();
      },
      g.sm_count());
  st->req = g.request(
      g.sm_count(), Gpu::Holder::persistent,
      [st](int k) {
        if (st->held == 0) st->t->mark_started();  // its first block
        st->held += k;
        st->c->fluid().set_bound(
            st->flow, st->g->sm_count() * st->c->contention().speed(st->shape, st->held));
      },
      w.priority);
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
  if (w.cls == KernelClass::grid)
    if (const auto s = c.contention().split_k(w.shape, w.alone_s)) {  // two kernels
      auto* parts = c.make<std::array<KernelPart, 2>>(s->slices, s->reduce);
      (*parts)[0].hbm_bytes += w.hbm_bytes;
      return run_fused(t, c, gpu, *parts, w.priority);
    }
  w.shape = c.contention().own_saturation(w.shape, w.alone_s);  // once, not at every change
  t.on_ready = [k = c.make<KernelCall>(&c, gpu, w)](sim::Task& task) {
    if (k->w.alone_s <= 0) return task.finish();
    Cluster& c = *k->c;
    Gpu& g = c.gpu(k->gpu);
    KernelWork w = k->w;
    w.alone_s /= g.speed();
    if (PowerState* p = c.power(k->gpu))
      w.alone_s *= p->run(c.engine().now().to_s(), w.shape.family, w.alone_s);
    switch (w.cls) {
      case KernelClass::grid:
        return run_grid(task, c, g, w.alone_s, w.hbm_bytes, w.shape, nullptr, nullptr, 0,
                        w.priority);
      case KernelClass::persistent_static:
        return run_static(task, c, g, w);
      case KernelClass::persistent_dynamic:
        return run_dynamic(task, c, g, w);
    }
  };
}

namespace {
struct FusedCall {
  Cluster* c;
  int gpu;
  const KernelPart* parts;
  Cluster::Prepared* prepared;  // per part, filled at its first use
  std::uint32_t n;
  Gpu::Priority priority;
};
}  // namespace

void run_fused(sim::Task& t, Cluster& c, int gpu, std::span<const KernelPart> parts,
               Gpu::Priority priority) {
  static_assert(std::is_trivially_destructible_v<Cluster::Prepared>);
  auto* prepared = static_cast<Cluster::Prepared*>(
      c.allocate(parts.size() * sizeof(Cluster::Prepared), alignof(Cluster::Prepared)));
  std::uninitialized_default_construct_n(prepared, parts.size());
  t.on_ready = [k = c.make<FusedCall>(&c, gpu, parts.data(), prepared,
                                      static_cast<std::uint32_t>(parts.size()),
                                      priority)](sim::Task& task) {
    Gpu& g = k->c->gpu(k->gpu);
    PowerState* power = k->c->power(k->gpu);
    const double now_s = k->c->engine().now().to_s();
    double alone = 0, hbm_bytes = 0;  // the run's HBM traffic at its mean rate
    for (std::uint32_t i = 0; i < k->n; ++i) {
      const KernelPart& p = k->parts[i];
      // The parts one after another under the power cap's clock, if the profile models it.
      p.power_slowdown =
          power ? power->run(now_s + alone / g.speed(), p.shape.family, p.alone_s / g.speed()) : 1;
      alone += p.alone_s * p.power_slowdown, hbm_bytes += p.hbm_bytes;
    }
    if (alone <= 0) return task.finish();
    run_grid(task, *k->c, g, alone / g.speed(), hbm_bytes, {}, k->parts, k->prepared, k->n,
             k->priority);
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
    c.engine().after(
        d, [&task] { task.finish(); }, sim::Priority::completion);
  };
}

}  // namespace twin::hardware
