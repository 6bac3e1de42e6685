// gpunet dashboard: the words and figures its pages show, as pure
// functions of the API's records (no DOM, no fetch), so that they can be
// tested outside a browser: internal/dashboard's TestPageText runs them in
// Node. app.js draws the pages with them (window.gpunetText).
'use strict';

(root => {
  const T = {};

  // What became of a replica in its job's verdict (ledger Assignment.outcome).
  T.OUTCOMES = {
    majority: ['in majority', 'good'],
    minority: ['outvoted', 'bad'],
    unrevealed: ['did not reveal', 'bad'],
    no_majority: ['no majority', 'warn'],
    bad_handover: ['handed over a wrong key', 'bad'],
    withheld_key: ['withheld the key', 'bad'],
    judge_outvoted: ['judged the outputs against the majority', 'bad'],
    judge_silent: ['did not judge the outputs', 'bad'],
    // A member of a replica gang (verification full): its gang outvoted,
    // or a co-member silent; not slashed, its own fault not shown.
    gang_outvoted: ['its replica gang was outvoted', 'warn'],
    gang_incomplete: ['a member of its replica gang did not reveal', 'warn'],
  };

  // auditPicked says whether a spot job's audit lottery picked it. The
  // ledger's audit_drawn says only that the lottery was held: it picked
  // the job when an extra replica exists or one was dropped (as
  // internal/jobtext.AuditPicked).
  T.auditPicked = j => !!j.audit_drawn && (!!j.dropped || !!j.audit_dropped || (j.assignments || []).some(a => a.extra));

  // verdictText says how the job's result was checked and what came of
  // it; done says the job has ended, and fmt writes an amount of usync
  // (default: as a number of usync).
  T.verdictText = (j, done, fmt) => {
    fmt = fmt || (u => u + ' usync');
    const sp = j.spec || {};
    const as = j.assignments || [];
    const revealed = as.filter(a => a.result);
    const outvoted = as.filter(a => T.OUTCOMES[a.outcome] && T.OUTCOMES[a.outcome][1] === 'bad');
    const slashed = as.reduce((n, a) => n + (a.slashed || 0), 0);
    const picked = T.auditPicked(j);
    let v;
    switch (j.verdict) {
      case 'validated':
        v = 'validated: ' + as.filter(a => a.outcome === 'majority').length + ' of ' + as.length + ' replicas agree';
        if (picked) v += ' · the audit lottery picked this job';
        break;
      case 'unverified':
        if (picked) v = 'accepted unverified: the audit lottery picked this job, but its audit replica did not run' + (j.audit_dropped ? ' (' + j.audit_dropped + ')' : '');
        else if (j.audit_drawn) v = 'accepted unverified: one replica; the audit lottery did not pick this job';
        else v = 'accepted unverified: one replica, no audit lottery held';
        break;
      case 'unchecked': v = 'not checked (verification none, or not deterministic): taken on the provider’s reputation'; break;
      case 'no_majority': v = 'no majority: the replicas disagreed up to the most replicas allowed; refunded, nobody slashed'; break;
      default:
        if (sp.verification === 'none') v = 'none requested';
        else if (done) v = 'no verdict';
        else {
          v = 'waiting for ' + (as.length ? revealed.length + ' of ' + as.length + ' replica result(s)' : 'a provider');
          if (picked) v += ' · the audit lottery picked this job: another provider re-runs it';
          else if (j.audit_drawn) v += ' · the audit lottery did not pick this job';
        }
    }
    if (outvoted.length) v += ' · ' + outvoted.length + ' replica(s) ' + outvoted.map(a => T.OUTCOMES[a.outcome][0]).join(', ');
    if (slashed) v += ', slashed ' + fmt(slashed) + ' in all';
    return v;
  };

  // priceScale picks the unit prices (usync per unit-hour) are shown in:
  // SYNC when the largest is at least a thousandth of one, else usync, so
  // that an axis of small prices (a devnet's index sits at its floor of
  // 1 usync) never reads 0 everywhere. div turns usync into the unit.
  T.priceScale = values => {
    const max = Math.max(0, ...values.filter(v => Number.isFinite(v)));
    return max >= 1000 ? {div: 1e6, unit: 'SYNC', digits: 4} : {div: 1, unit: 'usync', digits: 2};
  };

  // unitName is what one unit of a hardware class is: a core for the
  // CPU class, a GPU for a GPU model.
  T.unitName = cls => cls === 'cpu' ? 'core' : 'GPU';

  // modelHistory is a hardware class's price history, in usync per
  // unit-hour by block height: the median of the online providers' asks
  // (samples: GET /v1/stats/series, median_price in SYNC) and each tier's
  // index price (the index times the tier's factor) at the close of each
  // epoch (c: a class of GET /v1/market, with its history). A job pays
  // the larger of its provider's ask and its tier's index price.
  T.modelHistory = (c, samples) => [
    {name: 'median ask', points: (samples || []).filter(x => x.median_price && c.class in x.median_price).map(x => [x.height, Math.round(x.median_price[c.class] * 1e6)])},
    ...(c.prices || []).map(p => ({
      name: p.tier + ' index',
      points: (c.history || []).map(e => [e.height, e.index_micro * p.factor_ppm / 1e12]),
    })),
  ];

  // spend sums what an account's jobs and services cost it, in usync:
  // paid to providers, fees, refunds, and what its unfinished ones hold
  // in escrow now.
  T.spend = (jobs, services) => {
    const s = {jobs: jobs.length, services: services.length, paid: 0, fees: 0, refunded: 0, escrow: 0};
    for (const x of jobs.concat(services)) {
      s.paid += x.cost || 0;
      s.fees += x.fee || 0;
      s.refunded += x.refund || 0;
      s.escrow += x.escrow || 0;
    }
    s.spent = s.paid + s.fees;
    return s;
  };

  // labels merges the names the page knows for addresses: the node's
  // keyring's (keys: [{name, address}], with its API token) and those
  // this browser was given (local: {address: label}), which win.
  T.labels = (keys, local) => {
    const m = {};
    for (const k of keys || []) m[k.address] = k.name;
    for (const [a, l] of Object.entries(local || {})) if (l) m[a] = l;
    return m;
  };

  // labelText writes a provider's label (the ledger's ProviderInfo.label,
  // which the provider sets itself) as the page shows it beside the
  // provider's address: in quotes, its own words; '' for none. Any
  // provider may take any label, another's too, so the page never shows
  // a label without the address, and draws it as text (app.js's h()),
  // never as HTML.
  T.labelText = label => label ? '\u201c' + label + '\u201d' : '';

  // attestationText says what a provider's TEE evidence proved, as of the
  // block time the API answered at (apiwire.ProviderAttestation): kind,
  // measurement, TCB status, attested key and expiry, or that it is not
  // attested, expired, or over a key it no longer declares. Its evidence
  // fields are the provider's, drawn as text (app.js's h()).
  // gpuAttestationText lists a provider's GPUs whose NVIDIA evidence the
  // chain verified (apiwire.AttestedGPU): the identity from the GPU's
  // certificate, the UUID it was attested under, the CC mode the agent
  // reported (unsigned), until when; or that none is. Fields are the provider's, drawn as text.
  T.gpuAttestationText = gpus => {
    if (!gpus || !gpus.length) return 'none: its GPU identities are self-reported';
    return gpus.map(g => {
      const until = new Date(g.expiry * 1000).toISOString().replace('.000Z', 'Z');
      return 'GPU ' + g.id + ' as ' + g.uuid + (g.mode ? ' (' + g.mode + ')' : '') + (g.cc ? ' · CC ' + g.cc + ' (NVML\'s word, not signed)' : '') + (g.state === 'expired' ? ' · expired at ' : ' · until ') + until;
    }).join('; ');
  };

  T.attestationText = a => {
    if (!a || !a.state || a.state === 'none') return 'not attested: trust: tee jobs are not placed on it';
    const until = new Date(a.expiry * 1000).toISOString().replace('.000Z', 'Z');
    const proved = a.kind + ' evidence of block ' + a.height + ' · measurement ' + a.measurement + ' · TCB ' + (a.tcb_status || 'not given') + ' · key ' + a.key;
    switch (a.state) {
      case 'attested': return 'attested until ' + until + ': ' + proved;
      case 'expired': return 'expired at ' + until + ' (attests again to take trust: tee jobs): ' + proved;
      case 'key_changed': return 'not valid: it declares another key than the attested one: ' + proved;
    }
    return a.state + ': ' + proved;
  };
  T.LABEL_TITLE = 'label set by the provider itself: any provider may use any label, the address is what identifies it';

  // providerLabels records in m ({address: label}) the labels of a list
  // of providers (offers, or {address, label} of a provider's record): a
  // provider listed without one has none. It returns m.
  T.providerLabels = (m, list) => {
    for (const o of list || []) {
      if (!o || !o.address) continue;
      if (o.label) m[o.address] = o.label; else delete m[o.address];
    }
    return m;
  };

  root.gpunetText = T;
})(typeof window !== 'undefined' ? window : globalThis);
