//! XML written element by element, one per line, text escaped: the ISO 20022 files the
//! service writes (a pain.001 for a bank, a pain.002 for a customer).

#[derive(Default)]
pub(crate) struct Xml(pub(crate) String);

impl Xml {
    pub(crate) fn open(&mut self, name: &str) {
        self.0.push_str(&format!("<{name}>\n"));
    }

    pub(crate) fn close(&mut self, name: &str) {
        self.0.push_str(&format!("</{name}>\n"));
    }

    pub(crate) fn text(&mut self, name: &str, value: &str) {
        self.0
            .push_str(&format!("<{name}>{}</{name}>\n", quick_xml::escape::escape(value)));
    }
}
