//! pain.001 files as corporate customers' ERPs export them (`pain001/`, written for these
//! tests in the shape SAP and DATEV exports take), read into payout lines; and every way one
//! can be wrong, reported at once with where it is.

use ops_domain::files::pain001::{parse, Pain001};
use ops_domain::files::LineError;

const RAIL: &str = "psp-local:sandbox";

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/pain001")
            .join(name),
    )
    .unwrap()
}

fn errors(xml: &str) -> Vec<LineError> {
    parse(xml.as_bytes(), RAIL).unwrap_err().0
}

#[test]
fn a_version_03_export_reads_each_transaction_with_its_ids_beneficiary_and_group() {
    let Pain001 { initiation, lines } = parse(&fixture("erp-export.pain.001.001.03.xml"), RAIL).unwrap();
    assert_eq!(
        (
            initiation.version,
            initiation.message_id.as_str(),
            initiation.number_of_transactions
        ),
        (3, "PAYRUN-2026-12-001", 3)
    );
    assert_eq!(initiation.control_sum.as_deref(), Some("1500220.50"));
    let ids: Vec<&str> = initiation.payment_informations.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["SALARIES-CLP", "SUPPLIERS-EUR"]);
    let read: Vec<_> = lines
        .iter()
        .map(|l| {
            (
                l.group,
                l.end_to_end_id.as_deref().unwrap(),
                l.instruction_id.as_deref(),
                l.amount.minor_units(),
                l.currency.code(),
                l.beneficiary.id_type.as_str(),
                l.beneficiary.id.as_str(),
                l.destination.account.as_str(),
                l.reference.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            (
                0,
                "E2E-0001",
                Some("INSTR-0001"),
                1_000_000,
                "CLP",
                "rut",
                "12345678-9",
                "000111222333",
                Some("Salary December 2026")
            ),
            (
                0,
                "E2E-0002",
                None,
                500_000,
                "CLP",
                "bic",
                "SERVCLRM",
                "999888777",
                None
            ),
            // No creditor id: the beneficiary is its IBAN.
            (
                1,
                "INV-2026-118",
                None,
                22_050,
                "EUR",
                "iban",
                "DE02120300000000202051",
                "DE02120300000000202051",
                Some("Invoice 118")
            ),
        ]
    );
    assert!(lines.iter().all(|l| l.destination.rail == RAIL));
}

#[test]
fn a_version_09_export_reads_its_bic_choice_and_date_choice_the_same_way() {
    let Pain001 { initiation, lines } = parse(&fixture("erp-export.pain.001.001.09.xml"), RAIL).unwrap();
    assert_eq!(
        (initiation.version, initiation.message_name()),
        (9, "pain.001.001.09".to_string())
    );
    assert_eq!(initiation.control_sum, None);
    assert_eq!(
        initiation.payment_informations[0].control_sum.as_deref(),
        Some("1234.56")
    );
    let beneficiaries: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l.beneficiary.id_type.as_str(), l.beneficiary.id.as_str()))
        .collect();
    assert_eq!(beneficiaries, [("bic", "DEUTDEFFXXX"), ("nidn", "DE-99")]);
    assert_eq!(lines[1].amount.minor_units(), 23_456);
}

/// An error's line, path, payment information, end-to-end id and code.
type Placed = (usize, String, Option<String>, Option<String>, String);

const BROKEN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.001.001.03">
  <CstmrCdtTrfInitn>
    <GrpHdr><MsgId>M-1</MsgId><CreDtTm>2026-12-07T09:30:00</CreDtTm><NbOfTxs>5</NbOfTxs><CtrlSum>10</CtrlSum></GrpHdr>
    <PmtInf>
      <PmtInfId>P-1</PmtInfId><PmtMtd>TRF</PmtMtd><NbOfTxs>2</NbOfTxs>
      <CdtTrfTxInf>
        <PmtId><EndToEndId>E-1</EndToEndId></PmtId>
        <Amt><InstdAmt Ccy="CLP">10.5</InstdAmt></Amt>
        <CdtrAcct><Id><Othr><Id>1</Id></Othr></Id></CdtrAcct>
      </CdtTrfTxInf>
      <CdtTrfTxInf>
        <PmtId><InstrId>I-2</InstrId></PmtId>
        <Amt><InstdAmt Ccy="XXQ">1</InstdAmt></Amt>
        <CdtrAcct><Id><Othr><Id>2</Id></Othr></Id></CdtrAcct>
      </CdtTrfTxInf>
      <CdtTrfTxInf>
        <PmtId><EndToEndId>E-3</EndToEndId></PmtId>
        <Amt><EqvtAmt><Amt Ccy="EUR">1</Amt><CcyOfTrf>CLP</CcyOfTrf></EqvtAmt></Amt>
      </CdtTrfTxInf>
    </PmtInf>
    <PmtInf>
      <PmtInfId>P-1</PmtInfId><PmtMtd>CHK</PmtMtd>
      <CdtTrfTxInf>
        <PmtId><EndToEndId>E-4</EndToEndId></PmtId>
        <Amt><InstdAmt Ccy="USD">1.00</InstdAmt></Amt>
        <CdtrAcct><Id><Othr><Id>4</Id></Othr></Id></CdtrAcct>
        <RmtInf><Ustrd>Invoice 4</Ustrd></RmtInf>
      </CdtTrfTxInf>
    </PmtInf>
  </CstmrCdtTrfInitn>
</Document>"#;

#[test]
fn every_error_is_reported_at_once_with_its_path_line_payment_information_and_transaction() {
    let found: Vec<Placed> = errors(BROKEN)
        .into_iter()
        .map(|e| (e.line, e.path.unwrap(), e.payment_information, e.end_to_end_id, e.code))
        .collect();
    let p = |n: usize| format!("/Document/CstmrCdtTrfInitn/PmtInf[{n}]");
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        found,
        [
            // CLP has no decimals.
            (
                9,
                format!("{}/CdtTrfTxInf[1]/Amt/InstdAmt", p(1)),
                some("P-1"),
                some("E-1"),
                "invalid_amount".into()
            ),
            // A missing element is placed on its parent's line.
            (
                13,
                format!("{}/CdtTrfTxInf[2]/PmtId/EndToEndId", p(1)),
                some("P-1"),
                None,
                "invalid_end_to_end_id".into()
            ),
            (
                14,
                format!("{}/CdtTrfTxInf[2]/Amt/InstdAmt/@Ccy", p(1)),
                some("P-1"),
                None,
                "invalid_currency".into()
            ),
            (
                19,
                format!("{}/CdtTrfTxInf[3]/Amt/EqvtAmt", p(1)),
                some("P-1"),
                some("E-3"),
                "equivalent_amount_not_supported".into()
            ),
            (
                17,
                format!("{}/CdtTrfTxInf[3]/CdtrAcct/Id", p(1)),
                some("P-1"),
                some("E-3"),
                "parameter_missing".into()
            ),
            (
                6,
                format!("{}/NbOfTxs", p(1)),
                some("P-1"),
                None,
                "number_of_transactions_mismatch".into()
            ),
            (
                23,
                format!("{}/PmtInfId", p(2)),
                None,
                None,
                "duplicate_payment_information".into()
            ),
            (
                23,
                format!("{}/PmtMtd", p(2)),
                some("P-1"),
                None,
                "unsupported_payment_method".into()
            ),
            (
                4,
                "/Document/CstmrCdtTrfInitn/GrpHdr/NbOfTxs".into(),
                None,
                None,
                "number_of_transactions_mismatch".into()
            ),
            (
                4,
                "/Document/CstmrCdtTrfInitn/GrpHdr/CtrlSum".into(),
                None,
                None,
                "control_sum_mismatch".into()
            ),
        ]
    );
    let sum = errors(BROKEN)
        .into_iter()
        .find(|e| e.code == "control_sum_mismatch")
        .unwrap();
    assert_eq!(sum.message, "CtrlSum is 10, but the amounts add up to 12.5.");
}

#[test]
fn a_file_that_is_no_pain001_or_is_hostile_is_refused_whole_at_its_line() {
    let refused = |xml: &str| {
        let errors = errors(xml);
        assert_eq!(errors.len(), 1, "{errors:?}");
        (errors[0].line, errors[0].code.clone())
    };
    let entity = "<?xml version=\"1.0\"?>\n<!DOCTYPE d [<!ENTITY x \"y\">]>\n<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\">&x;</Document>";
    assert_eq!(refused(entity), (2, "dtd_not_allowed".into()));
    let statement = "<?xml version=\"1.0\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.02\"/>";
    assert_eq!(refused(statement), (2, "wrong_message".into()));
    let deep = format!(
        "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\">{}{}</Document>",
        "<a>".repeat(40),
        "</a>".repeat(40)
    );
    assert_eq!(refused(&deep), (1, "too_deep".into()));
    let unclosed =
        "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\">\n<CstmrCdtTrfInitn>\n</Document>";
    assert_eq!(refused(unclosed), (3, "invalid_xml".into()));
    assert_eq!(refused(""), (1, "empty_file".into()));
    assert_eq!(refused("a,b\n1,2\n"), (1, "wrong_message".into()));
}

#[test]
fn a_message_of_more_payment_informations_than_a_file_keeps_is_refused_at_the_first_too_many() {
    let block = |n: usize| {
        format!(
            "<PmtInf><PmtInfId>P-{n}</PmtInfId><PmtMtd>TRF</PmtMtd><CdtTrfTxInf><PmtId><EndToEndId>E-{n}</EndToEndId></PmtId>\
             <Amt><InstdAmt Ccy=\"CLP\">10</InstdAmt></Amt><CdtrAcct><Id><Othr><Id>A-{n}</Id></Othr></Id></CdtrAcct></CdtTrfTxInf></PmtInf>\n"
        )
    };
    let count = ops_domain::files::pain001::MAX_PAYMENT_INFORMATIONS + 1;
    let xml = format!(
        "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\"><CstmrCdtTrfInitn>\n\
         <GrpHdr><MsgId>M</MsgId><CreDtTm>2026-12-07T09:30:00</CreDtTm><NbOfTxs>{count}</NbOfTxs></GrpHdr>\n{}</CstmrCdtTrfInitn></Document>",
        (1..=count).map(block).collect::<String>()
    );
    let found = errors(&xml);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].code.as_str(), found[0].path.as_deref(), found[0].line),
        (
            "too_many_payment_informations",
            Some("/Document/CstmrCdtTrfInitn/PmtInf[101]"),
            count + 2
        )
    );
    let fewer = xml
        .replace(&block(count), "")
        .replace(&format!("<NbOfTxs>{count}"), &format!("<NbOfTxs>{}", count - 1));
    assert_eq!(
        parse(fewer.as_bytes(), RAIL)
            .unwrap()
            .initiation
            .payment_informations
            .len(),
        count - 1
    );
}

#[test]
fn amounts_too_large_for_any_currency_are_refused_however_many_add_up() {
    let huge = "999999999999999999.99999999999999999";
    let transactions: String = (1..=2_000)
        .map(|n| {
            format!(
                "<CdtTrfTxInf><PmtId><EndToEndId>E-{n}</EndToEndId></PmtId><Amt><InstdAmt Ccy=\"EUR\">{huge}</InstdAmt></Amt>\
                 <CdtrAcct><Id><Othr><Id>A</Id></Othr></Id></CdtrAcct></CdtTrfTxInf>"
            )
        })
        .collect();
    let xml = format!(
        "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\"><CstmrCdtTrfInitn>\
         <GrpHdr><MsgId>M</MsgId><CreDtTm>2026-12-07T09:30:00</CreDtTm><NbOfTxs>2000</NbOfTxs><CtrlSum>{huge}</CtrlSum></GrpHdr>\
         <PmtInf><PmtInfId>P</PmtInfId><PmtMtd>TRF</PmtMtd>{transactions}</PmtInf></CstmrCdtTrfInitn></Document>"
    );
    let (reported, total) = parse(xml.as_bytes(), RAIL).unwrap_err();
    assert_eq!(total, 2_001, "each amount, and the control sum they do not add up to");
    assert!(reported.iter().take(1_000).all(|e| e.code == "invalid_amount"));
}
