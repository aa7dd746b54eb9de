//! Backend sampling of the vocabulary stages and top-p AFTER a cut on the vocabulary (min-p,
//! top-p, min-p's fallback, typical, top-n-sigma, xtc before them): the record is the masked row,
//! where the CPU chain holds the survivors in token order, so a dynamic temp_ext, mirostat (v1),
//! typical, xtc, top-n-sigma, mirostat_v2, min-p with `min_keep > 1` or `p > 1` and top-p run on
//! the backend there, counting the row's finite entries. Every chain's tokens over many steps
//! equal its CPU chain's in a mixed batch (`vocab_cases::AFTER_CUT`, also run on Vulkan), at a
//! small vocabulary and at 151936; the candidates read back before the draws equal the CPU
//! chain's to 1e-5.

mod vocab_cases;

use vocab_cases::{
    AFTER_CUT, AFTER_CUT_CANDIDATES, AFTER_CUT_PLACEMENTS, bad_rows_of, candidates_of, logits_for, run, sorted_logits,
};

#[test]
fn stages_after_a_cut_match_the_cpu_chain_at_a_small_vocabulary() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 60, &AFTER_CUT, logits_for, cpu, None), AFTER_CUT_PLACEMENTS);
    // Rows with a single finite entry (a cut of one: entropy 0, one candidate) and many ties.
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 40, &AFTER_CUT, sorted_logits, cpu, None), AFTER_CUT_PLACEMENTS);
}

#[test]
fn stages_after_a_cut_match_the_cpu_chain_at_151936() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(151_936, 10, &AFTER_CUT, logits_for, cpu, None), AFTER_CUT_PLACEMENTS);
}

#[test]
fn stages_after_a_cut_read_back_the_cpu_chains_candidates() {
    candidates_of(&AFTER_CUT_CANDIDATES, 1000, 30, Box::new(cpu::CpuBackend::new()), None);
    candidates_of(&AFTER_CUT_CANDIDATES, 151_936, 3, Box::new(cpu::CpuBackend::new()), None);
}

#[test]
fn stages_after_a_cut_fail_bad_rows_alone() {
    bad_rows_of(&AFTER_CUT, 1000, Box::new(cpu::CpuBackend::new()), None);
}

/// On the CPU alone: a chain after a cut draws as the stage's vocabulary-view form on the masked
/// row does (the cut's survivors kept, every other entry `-inf`), draw for draw, for the stages
/// whose decisions no count of the masked entries enters; and a stage that sorts (`top_k`) ends
/// the cut, so the chain after it keeps llama.cpp's sorted list forms.
#[test]
fn after_a_cut_the_cpu_chain_runs_the_vocabulary_form_on_the_masked_row() {
    use sampling::{Chain, Sampler};
    for (cut, rest) in [
        ("min_p(p=0.05)", "top_p(p=0.9);dist(seed=3)"),
        ("top_p(p=0.95)", "top_p(p=0.5,min_keep=4);dist(seed=4)"),
        ("min_p(p=0.05)", "typical(p=0.9);dist(seed=5)"),
        ("top_p(p=0.9)", "top_n_sigma(n=1);dist(seed=6)"),
        ("min_p(p=0.02)", "mirostat_v2(tau=4,eta=0.1,seed=7)"),
        ("min_p(p=0.2)", "min_p(p=2,min_keep=5);dist(seed=8)"),
    ] {
        let mut whole = Chain::parse(&format!("{cut};{rest}")).unwrap();
        let mut first = Chain::parse(cut).unwrap();
        let mut second = Chain::parse(rest).unwrap();
        for step in 0..120 {
            let x = logits_for(1000, step, step % 7);
            let got = whole.sample(&x).unwrap();
            let mut masked = vec![f32::NEG_INFINITY; x.len()];
            for c in first.run(&x).unwrap().candidates {
                masked[c.id as usize] = x[c.id as usize];
            }
            let want = second.sample(&masked).unwrap();
            assert_eq!(got, want, "`{cut};{rest}` step {step}");
            whole.accept(got);
            second.accept(want);
        }
    }
    // After top_k the list is sorted, not a cut: `min_p;top_k;typical` keeps typical's list form,
    // which the same chain on the sorted list gives.
    let spec = "min_p(p=0.05);top_k(k=30);typical(p=0.8);dist(seed=9)";
    let (mut a, mut b) = (Chain::parse(spec).unwrap(), Chain::parse(spec).unwrap());
    for step in 0..60 {
        let x = logits_for(1000, step, step % 7);
        let mut list: Vec<sampling::TokenData> =
            x.iter().enumerate().map(|(i, &l)| sampling::TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
        list.sort_by(|p, q| q.logit.total_cmp(&p.logit).then(p.id.cmp(&q.id)));
        let mut cur = sampling::Candidates::from_list(list, x.len()).unwrap();
        b.apply(&mut cur).unwrap();
        assert_eq!(a.sample(&x).unwrap(), cur.selected_token().unwrap(), "`{spec}` step {step}");
        a.accept(cur.selected_token().unwrap());
        b.accept(cur.selected_token().unwrap());
    }
}
