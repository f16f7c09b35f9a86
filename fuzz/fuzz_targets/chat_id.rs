//! Any string as a chat id: a valid one is always a single, non-climbing path component.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::model::ChatId;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(id) = ChatId::new(text) {
        let path = std::path::Path::new(id.as_str());
        let mut components = path.components();
        assert!(matches!(components.next(), Some(std::path::Component::Normal(_))));
        assert!(components.next().is_none());
        assert!(id.as_str().len() <= 255);
    }
});
