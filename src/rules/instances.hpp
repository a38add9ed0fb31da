#pragma once
// Internal to the soundness checker (soundness.cpp): the random instances it
// runs rules on (instances.cpp). Types for the variables of a rule written
// as a formula; for a rule that must be run, its left side built in a small
// e-graph with random producers and attributes, or a spool::nn composite.

#include <spool/egraph/egraph.hpp>
#include <spool/hlir/language.hpp>
#include <spool/egraph/pattern.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace spool::rules::detail {

// Thrown where a rule needs what the checker cannot draw: the rule is
// reported as not checked, with `why`.
class Unsupported {
 public:
  std::string why;
};
// An instance that does not fit the left side: draw another.
struct Retry {};

// Random types for a rule's variables: mostly one dtype and one shape, as
// the variables of most rules share them, with some drawn apart.
class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}

  std::vector<TensorType> draw(size_t count) { return draw(count, dtype()); }
  // The same with the common dtype given: the checker runs every dtype in turn.
  std::vector<TensorType> draw(size_t count, DType common) {
    const Shape base = shape();
    std::vector<TensorType> types(count);
    for (TensorType& t : types) {
      t.dtype = coin(0.8) ? common : dtype();
      t.shape = coin(0.8) ? base : shape();
    }
    return types;
  }

 private:
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  DType dtype() {
    static constexpr DType choices[] = {DType::F32, DType::F32, DType::F32, DType::BF16,
                                        DType::F16, DType::I32, DType::I64, DType::Bool};
    return choices[rng_() % std::size(choices)];
  }
  Shape shape() {
    Shape s(rng_() % 4);
    for (int64_t& d : s) d = 1 + static_cast<int64_t>(rng_() % 4);
    return s;
  }
  std::mt19937_64 rng_;
};

// Random classes and attributes in a small e-graph, for a left side to be
// built from: variables become random inputs or small producers of the
// kinds kernel rules look for (views, fused programs, gemms, reductions).
class Instantiator {
 public:
  Instantiator(hlir::HlirLanguage& lang, egraph::EGraph& g, std::mt19937_64& rng)
      : lang_(lang), g_(g), rng_(rng) {}

  const hlir::ClassData& data(egraph::ClassId c) const {
    return dynamic_cast<const hlir::HlirAnalysis&>(*g_.analysis()).data(g_.find_const(c));
  }

  egraph::ClassId input(const TensorType& t) {
    return g_.add_leaf(lang_.op(Op::Input), lang_.source_attr(NameAttr{fmt::format("in{}", inputs_++)}, t));
  }
  egraph::ClassId view(egraph::ClassId c, const View& v) {
    if (v.is_identity()) return c;
    return g_.add(lang_.view_op(), lang_.view_attr(v), std::span<const egraph::ClassId>(&c, 1));
  }

  // A class of type `t`: an input, or a view, fused program, gemm or
  // reduction producing it.
  egraph::ClassId var(const TensorType& t);

  // A random attribute for `op` over children of types `kids`.
  egraph::AttrId attr(egraph::OpId op, const std::vector<TensorType>& kids);

  egraph::ClassId add_node(egraph::OpId op, egraph::AttrId attr, const std::vector<egraph::ClassId>& kids) {
    return g_.add(op, attr, std::span<const egraph::ClassId>(kids.data(), kids.size()));
  }
  egraph::ClassId add(Op op, const Attr& attr, const std::vector<egraph::ClassId>& kids) {
    return g_.add(lang_.op(op), lang_.attr(attr), std::span<const egraph::ClassId>(kids.data(), kids.size()));
  }

  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

 private:
  egraph::ClassId var_view(const TensorType& t);
  egraph::ClassId fused(const std::vector<egraph::ClassId>& kids, DType dtype, size_t rank);
  // A program over `k` inputs of `dtype` with a result of `dtype`.
  ProgramAttr random_program(size_t k, DType dtype);
  // A view reading a buffer (whose shape it sets in `source`) as `target`:
  // a broadcast of some axes, after a permutation, or a slice of one axis.
  View random_view_to(const Shape& target, Shape& source);
  // A random view of a buffer of shape `source`.
  View random_view_from(const Shape& source);

  hlir::HlirLanguage& lang_;
  egraph::EGraph& g_;
  std::mt19937_64& rng_;
  int inputs_ = 0;
};

// Builds the left side `pattern` into `inst`'s graph; variables read `vars`
// (made on first use from `types`), attribute variables `attrs`.
egraph::ClassId build_lhs(const egraph::Pattern& pattern, Instantiator& inst, const std::vector<TensorType>& types,
                          std::vector<egraph::ClassId>& vars, std::vector<std::optional<egraph::AttrId>>& attrs);

// Instances of the composites that recognition rules look for, built by
// spool::nn with random shapes and a random floating dtype: their exact
// structure (constants, keepdim views) cannot be drawn at random. `which`
// picks the composite.
Graph nn_instance(std::mt19937_64& rng, size_t which);

}  // namespace spool::rules::detail
