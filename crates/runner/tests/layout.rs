//! Layout rules of the workspace's sources, checked by parsing every crate's
//! `src/` with syn (nothing is compiled or run):
//!
//! - [`no_import_circles`]: within a crate, no two files import each other,
//!   directly or through other files. An import is any path that starts with
//!   `crate::`, `super::`, `self::` or a child module's name (in `use` trees,
//!   code, types and macro invocations); it points at the file that defines
//!   the longest module prefix of the path. A file's own paths to itself
//!   don't count, and neither does declaring a module (`mod foo;`).
//! - [`no_long_functions`]: no function (free, method or trait default) is
//!   longer than [`MAX_FN_LINES`] lines, from its `fn` line to its closing
//!   brace.
//!
//! Code under `#[cfg(test)]` is left out of both: a test module may
//! `use super::*`. Each compilation root (`src/lib.rs`, `src/main.rs`,
//! `src/bin/…`) is its own module tree, since `crate::` means a different
//! thing in each. Failures are grouped by crate; run with `--nocapture` to
//! see every crate's summary. `LAYOUT_CRATES_DIR=<path>/crates` checks
//! another checkout.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::{self, Visit};
use syn::{Attribute, Item, UseTree};

/// The longest a function may be, in lines.
const MAX_FN_LINES: usize = 100;

#[test]
fn no_import_circles() {
    let mut report = String::new();
    let mut failed = Vec::new();
    for krate in workspace_crates() {
        let circles: Vec<String> = krate.trees.iter().flat_map(|tree| circles(&krate, tree)).collect();
        if circles.is_empty() {
            writeln!(report, "{}: no import circles", krate.name).unwrap();
        } else {
            writeln!(report, "{}: {} import circle(s)", krate.name, circles.len()).unwrap();
            for c in &circles {
                report.push_str(c);
            }
            failed.push(krate.name.clone());
        }
    }
    println!("{report}");
    assert!(failed.is_empty(), "import circles in {}:\n\n{report}", failed.join(", "));
}

#[test]
fn no_long_functions() {
    let mut all = Vec::new();
    let mut report = String::new();
    let mut failed = Vec::new();
    for krate in workspace_crates() {
        let mut fns = function_lengths(&krate);
        fns.sort_by(|a, b| b.lines.cmp(&a.lines).then_with(|| a.place.cmp(&b.place)));
        let long: Vec<&FnLength> = fns.iter().filter(|f| f.lines > MAX_FN_LINES).collect();
        if long.is_empty() {
            writeln!(report, "{}: no function over {MAX_FN_LINES} lines", krate.name).unwrap();
        } else {
            writeln!(report, "{}: {} function(s) over {MAX_FN_LINES} lines", krate.name, long.len()).unwrap();
            for f in long {
                writeln!(report, "  {f}").unwrap();
            }
            failed.push(krate.name.clone());
        }
        all.extend(fns);
    }
    all.sort_by(|a, b| b.lines.cmp(&a.lines).then_with(|| a.place.cmp(&b.place)));
    println!("The five longest functions of the workspace:");
    for f in all.iter().take(5) {
        println!("  {f}");
    }
    println!("\n{report}");
    assert!(failed.is_empty(), "functions over {MAX_FN_LINES} lines in {}:\n\n{report}", failed.join(", "));
}

// ---------------------------------------------------------------------------
// Crates and their module trees.

/// A crate of the workspace with the module tree of each of its roots.
struct Crate {
    name: String,
    dir: PathBuf,
    trees: Vec<Tree>,
}

impl Crate {
    /// `path` relative to the crate, for messages (`src/ops/mod.rs`).
    fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.dir).unwrap_or(path).display().to_string()
    }
}

/// The modules of one compilation root (`src/lib.rs`, `src/main.rs` or a
/// binary under `src/bin/`), test-only modules left out.
struct Tree {
    /// The root file.
    root: PathBuf,
    /// Module path from the root (empty for the root) → the file holding it.
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// Each file of the tree: its module path and its syntax tree.
    files: Vec<SourceFile>,
}

struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    ast: syn::File,
}

/// The workspace's `crates/` folder, or the folder `LAYOUT_CRATES_DIR`
/// names (to check another checkout with the same test binary).
fn workspace_crates() -> Vec<Crate> {
    let crates_dir = std::env::var_os("LAYOUT_CRATES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let mut crates: Vec<Crate> = fs::read_dir(&crates_dir)
        .expect("the crates/ folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|dir| dir.join("src").is_dir())
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let trees = roots(&dir.join("src")).into_iter().map(|root| load_tree(&root)).collect();
            Crate { name, dir, trees }
        })
        .collect();
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(crates.len() > 1, "no crates found under {}", crates_dir.display());
    crates
}

/// `src/lib.rs`, `src/main.rs`, `src/bin/*.rs` and `src/bin/*/main.rs` that exist.
fn roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).filter(|p| p.is_file()).collect();
    if let Ok(entries) = fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .map(|p| if p.is_dir() { p.join("main.rs") } else { p })
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

fn load_tree(root: &Path) -> Tree {
    let mut tree = Tree { root: root.to_path_buf(), modules: BTreeMap::new(), files: Vec::new() };
    load_file(&mut tree, root, Vec::new(), true);
    tree
}

/// Parses `path` as module `module` and, recursively, the modules it declares.
fn load_file(tree: &mut Tree, path: &Path, module: Vec<String>, is_root: bool) {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let parent = path.parent().unwrap();
    let own_dir = is_root || path.file_name().is_some_and(|n| n == "mod.rs");
    // Where `mod child;` looks for `child.rs` or `child/mod.rs`.
    let child_dir = if own_dir { parent.to_path_buf() } else { parent.join(path.file_stem().unwrap()) };
    tree.modules.insert(module.clone(), path.to_path_buf());
    declared_modules(tree, &ast.items, &module, &child_dir, path);
    tree.files.push(SourceFile { path: path.to_path_buf(), module, ast });
}

/// Registers the modules `items` declare (inline ones belong to `file`).
fn declared_modules(tree: &mut Tree, items: &[Item], module: &[String], dir: &Path, file: &Path) {
    for item in items {
        let Item::Mod(m) = item else { continue };
        if is_test_only(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut path = module.to_vec();
        path.push(name.clone());
        match &m.content {
            Some((_, inner)) => {
                tree.modules.insert(path.clone(), file.to_path_buf());
                declared_modules(tree, inner, &path, &dir.join(&name), file);
            }
            None => {
                let child = match path_attribute(&m.attrs) {
                    Some(p) => file.parent().unwrap().join(p),
                    None if dir.join(format!("{name}.rs")).is_file() => dir.join(format!("{name}.rs")),
                    None => dir.join(&name).join("mod.rs"),
                };
                load_file(tree, &child, path, false);
            }
        }
    }
}

/// `#[path = "…"]` on a module declaration.
fn path_attribute(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// `#[cfg(test)]` or `#[cfg(all(test, …))]`: compiled for tests only.
fn is_test_only(attrs: &[Attribute]) -> bool {
    fn test_only(meta: &syn::Meta) -> bool {
        match meta {
            syn::Meta::Path(p) => p.is_ident("test"),
            syn::Meta::List(l) if l.path.is_ident("all") => l
                .parse_args_with(syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                .is_ok_and(|args| args.iter().any(test_only)),
            _ => false,
        }
    }
    attrs.iter().filter(|a| a.path().is_ident("cfg")).any(|a| a.parse_args::<syn::Meta>().is_ok_and(|m| test_only(&m)))
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn impl_item_attrs(item: &syn::ImplItem) -> &[Attribute] {
    match item {
        syn::ImplItem::Const(i) => &i.attrs,
        syn::ImplItem::Fn(i) => &i.attrs,
        syn::ImplItem::Type(i) => &i.attrs,
        syn::ImplItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

fn trait_item_attrs(item: &syn::TraitItem) -> &[Attribute] {
    match item {
        syn::TraitItem::Const(i) => &i.attrs,
        syn::TraitItem::Fn(i) => &i.attrs,
        syn::TraitItem::Type(i) => &i.attrs,
        syn::TraitItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

// ---------------------------------------------------------------------------
// Imports between files.

/// A path in a file that may name another file's module.
struct Reference {
    /// The module the path is written in (inline modules included).
    module: Vec<String>,
    segments: Vec<String>,
    line: usize,
}

/// Collects the paths of non-test code, tracking inline modules.
struct References {
    module: Vec<String>,
    found: Vec<Reference>,
}

impl References {
    fn add(&mut self, segments: Vec<String>, line: usize) {
        self.found.push(Reference { module: self.module.clone(), segments, line });
    }

    /// Every path a `use` tree names (`use a::{b, c::*}` → `a::b`, `a::c`).
    fn use_tree(&mut self, tree: &UseTree, prefix: &mut Vec<String>) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            UseTree::Name(n) => self.use_leaf(prefix, Some(&n.ident), n.ident.span()),
            UseTree::Rename(r) => self.use_leaf(prefix, Some(&r.ident), r.ident.span()),
            UseTree::Glob(g) => self.use_leaf(prefix, None, g.star_token.span),
            UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(t, prefix)),
        }
    }

    fn use_leaf(&mut self, prefix: &[String], name: Option<&syn::Ident>, span: proc_macro2::Span) {
        let mut segments = prefix.to_vec();
        // `use a::{self}` names `a`.
        if let Some(name) = name.filter(|n| *n != "self" || prefix.is_empty()) {
            segments.push(name.to_string());
        }
        self.add(segments, span.start().line);
    }

    /// Paths of at least two segments inside a macro's tokens
    /// (`host_ops!(…, linear = crate::linear::flex::linear)`).
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let colons = |i: usize| {
            matches!((tokens.get(i), tokens.get(i + 1)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && b.as_char() == ':')
        };
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(first) if i < 2 || !colons(i - 2) => {
                    let mut segments = vec![first.to_string()];
                    while colons(i + 1) {
                        let Some(TokenTree::Ident(next)) = tokens.get(i + 3) else { break };
                        segments.push(next.to_string());
                        i += 3;
                    }
                    if segments.len() > 1 {
                        self.add(segments, first.span().start().line);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for References {
    fn visit_item(&mut self, item: &'ast Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if !is_test_only(impl_item_attrs(item)) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        if !is_test_only(trait_item_attrs(item)) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // A declaration `mod foo;` is no import; an inline module's items are
        // this file's, written in that module.
        if let Some((_, items)) = &m.content {
            self.module.push(m.ident.to_string());
            items.iter().for_each(|i| self.visit_item(i));
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_none() {
            self.use_tree(&u.tree, &mut Vec::new());
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.add(segments, path.segments[0].ident.span().start().line);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }

    // `pub(crate)` and attributes name no module of this crate.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
    fn visit_attribute(&mut self, _: &'ast Attribute) {}
}

impl Tree {
    /// The file that defines the longest module prefix of `r`'s path, if the
    /// path is one of this crate's (`crate::`, `self::`, `super::` or a child
    /// module of the module it is written in).
    fn resolve(&self, r: &Reference) -> Option<&PathBuf> {
        let segs = &r.segments;
        let (mut absolute, rest) = match segs.first()?.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (r.module.clone(), &segs[1..]),
            "super" => {
                let supers = segs.iter().take_while(|s| *s == "super").count();
                let keep = r.module.len().checked_sub(supers)?;
                (r.module[..keep].to_vec(), &segs[supers..])
            }
            first => {
                let mut child = r.module.clone();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                (r.module.clone(), &segs[..])
            }
        };
        absolute.extend(rest.iter().cloned());
        (0..=absolute.len()).rev().find_map(|n| self.modules.get(&absolute[..n]))
    }
}

/// Why one file imports another: the paths and their lines.
type Edges = BTreeMap<(PathBuf, PathBuf), Vec<(usize, String)>>;

fn imports(tree: &Tree) -> Edges {
    let mut edges = Edges::new();
    for file in &tree.files {
        let mut refs = References { module: file.module.clone(), found: Vec::new() };
        file.ast.items.iter().for_each(|i| refs.visit_item(i));
        for r in &refs.found {
            match tree.resolve(r) {
                Some(target) if *target != file.path => {
                    edges.entry((file.path.clone(), target.clone())).or_default().push((r.line, r.segments.join("::")))
                }
                _ => {}
            }
        }
    }
    for why in edges.values_mut() {
        why.sort();
        why.dedup();
    }
    edges
}

/// One message per import circle (strongly connected component of more
/// than one file) of the tree, with the imports inside it.
fn circles(krate: &Crate, tree: &Tree) -> Vec<String> {
    let edges = imports(tree);
    let nodes: Vec<&PathBuf> = tree.files.iter().map(|f| &f.path).collect();
    let mut messages = Vec::new();
    for component in strongly_connected(&nodes, &edges) {
        if component.len() < 2 {
            continue;
        }
        let names: Vec<String> = component.iter().map(|p| krate.show(p)).collect();
        let mut m = format!("  circle in {} ({}):\n", krate.show(&tree.root), names.join(" ↔ "));
        for ((from, to), why) in &edges {
            if component.contains(from) && component.contains(to) {
                writeln!(m, "    {} → {}:", krate.show(from), krate.show(to)).unwrap();
                for (line, path) in why {
                    writeln!(m, "      {}:{line}  {path}", krate.show(from)).unwrap();
                }
            }
        }
        messages.push(m);
    }
    messages
}

/// Tarjan's algorithm: the strongly connected components of the graph.
fn strongly_connected(nodes: &[&PathBuf], edges: &Edges) -> Vec<BTreeSet<PathBuf>> {
    struct State<'a> {
        next: BTreeMap<&'a PathBuf, Vec<&'a PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        components: Vec<BTreeSet<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.next.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.clone());
                if w == v {
                    break;
                }
            }
            s.components.push(component);
        }
    }
    let mut next: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let mut s = State {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.components
}

// ---------------------------------------------------------------------------
// Function lengths.

struct FnLength {
    /// `src/file.rs:line`.
    place: String,
    /// `name`, `Type::name` or `Trait::name`.
    name: String,
    lines: usize,
}

impl std::fmt::Display for FnLength {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} lines  {}  {}", self.lines, self.place, self.name)
    }
}

/// Measures the non-test functions of one file.
struct Lengths<'a> {
    file: &'a str,
    /// The impl's type or the trait whose items are being visited.
    owner: Vec<String>,
    found: Vec<FnLength>,
}

impl Lengths<'_> {
    fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let first = sig.fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        let name = match self.owner.last() {
            Some(owner) => format!("{owner}::{}", sig.ident),
            None => sig.ident.to_string(),
        };
        self.found.push(FnLength { place: format!("{}:{first}", self.file), name, lines: last + 1 - first });
    }
}

impl<'ast> Visit<'ast> for Lengths<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if !is_test_only(impl_item_attrs(item)) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        if !is_test_only(trait_item_attrs(item)) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            items.iter().for_each(|i| self.visit_item(i));
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let owner = match &*i.self_ty {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        self.owner.push(owner.unwrap_or_else(|| "impl".into()));
        visit::visit_item_impl(self, i);
        self.owner.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.owner.push(t.ident.to_string());
        visit::visit_item_trait(self, t);
        self.owner.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        // A function inside a method body is no method of the impl.
        let owner = std::mem::take(&mut self.owner);
        self.add(&f.sig, &f.block);
        visit::visit_item_fn(self, f);
        self.owner = owner;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(&f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.add(&f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }
}

/// Every non-test function of the crate's files (each file once, also when
/// two roots include it).
fn function_lengths(krate: &Crate) -> Vec<FnLength> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for file in krate.trees.iter().flat_map(|t| &t.files) {
        if !seen.insert(&file.path) {
            continue;
        }
        let name = krate.show(&file.path);
        let mut lengths = Lengths { file: &name, owner: Vec::new(), found: Vec::new() };
        file.ast.items.iter().for_each(|i| lengths.visit_item(i));
        found.extend(lengths.found);
    }
    found
}
