// Overload{lambda...}: a visitor for std::visit built from lambdas. Used
// without a generic catch-all, a variant alternative that nobody handles is a
// compile error rather than a silent default.
#pragma once

namespace memdiag {

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

}  // namespace memdiag
